"""The application services (tracekit/commands/) called directly, without click: one typed request
in, the output back, nothing printed. nccl_data (a 2-rank ResNet training step with NCCL all-reduces)
is the shared trace: 3,774 device activities, 165,185,838 ns of device time, all attributed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.commands.analyze import analyze
from tracekit.commands.analyze import AnalyzeRequest
from tracekit.commands.diff import DiffRequest, diff
from tracekit.commands.ingest import IngestRequest, ingest
from tracekit.commands.label import LabelRequest, label
from tracekit.commands.output import Lines, Output
from tracekit.commands.plot import PlotRequest, plot
from tracekit.commands.report import ReportRequest, report
from tracekit.commands.summary import SummaryRequest, summary
from tracekit.commands.whatif import WhatifRequest, whatif
from tracekit.errors import TracekitError, UsageError

NCCL = "kineto/hta/nccl_parser_config/nccl_data.json.gz"


def body(o: Output) -> bytes:
    """The output's bytes, whole or joined from its pieces."""
    return o.body.encode() if isinstance(o.body, str) else o.body if isinstance(o.body, bytes) else b"".join(o.body)


def test_analyze_a_file_returns_the_document_and_prints_nothing(
    shared_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    o = analyze(AnalyzeRequest(str(shared_traces / NCCL), fmt="json"))
    doc = json.loads(body(o))
    assert capsys.readouterr() == ("", "")  # the service never prints
    assert o.out is None and o.error is None and doc["trace"]["world_size"] == 2
    t = doc["totals"]
    assert (t["activity_count"], t["device_time_ns"], t["attributed_ns"]) == (3774, 165_185_838, 165_185_838)
    # busy 157,500,014 ns of a 660,551,005 ns window = 23.8 % < 50 %: overhead bound
    assert t["trace"]["bound"] == "overhead" and t["trace"]["busy_ns"] == 157_500_014
    assert (
        analyze(AnalyzeRequest(str(shared_traces / NCCL), fmt="md", regions=3)).body.startswith("#")  # type: ignore[union-attr]
    )


def test_ingest_then_analyze_stores_and_reuses_the_result(shared_traces: Path, tmp_path: Path) -> None:
    bar = Lines()
    o = ingest(IngestRequest((str(shared_traces / NCCL),), tmp_path / "ds"), bar)
    assert o.body == f"ingested 1 of 1 traces into {tmp_path / 'ds'}\n" and o.error is None
    # one line per trace as it lands: 3,774 device activities and 72 regions of 40,573 events
    assert len(bar) == 1 and "3,774 device activities" in bar[0] and "72 regions" in bar[0]
    req = AnalyzeRequest(str(tmp_path / "ds"), fmt="json", out=str(tmp_path / "a.json"))
    first = analyze(req)
    assert first.out == tmp_path / "a.json" and first.notes == (f"wrote {tmp_path / 'a.json'}",)
    computed = body(first)  # the pieces, stored in the dataset as they are read
    assert len(list((tmp_path / "ds" / "analysis_results").rglob("*.json"))) == 1
    again = analyze(req)
    # the stored document, read back from the entry in pieces as they are printed (results.Stored)
    assert not isinstance(again.body, (str, bytes)) and b"".join(again.body) == computed
    assert json.loads(computed)["totals"]["device_time_ns"] == 165_185_838
    (tmp_path / "a.json").write_bytes(computed)  # the command writes the file, not the service
    with pytest.raises(UsageError, match="already exists"):  # the output path is checked before the work
        analyze(AnalyzeRequest(str(tmp_path / "ds"), out=str(tmp_path / "a.json")))


def test_a_failed_input_comes_back_as_the_error_to_raise_after_the_lines(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(b'{"traceEvents": [{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"du')
    bar = Lines()
    o = ingest(IngestRequest((str(cut),), tmp_path / "ds"), bar)
    assert bar == [f"{cut}: error: {cut}: trace has no events (file is cut off)"]
    assert o.body == f"ingested 0 of 1 traces into {tmp_path / 'ds'}\n"
    assert (
        isinstance(o.error, TracekitError)
        and str(o.error) == "1 of 1 inputs failed: cut.json (trace has no events (file is cut off))"
    )


def test_report_names_its_file_and_its_plots(shared_traces: Path, tmp_path: Path) -> None:
    o = report(ReportRequest(str(shared_traces / NCCL), out=str(tmp_path / "r.md")))
    assert o.fmt == "md" and o.out == tmp_path / "r.md"  # the format from the suffix
    assert o.notes[0] == f"wrote {tmp_path / 'r.md'} and plots in {tmp_path / 'r_plots'}"
    assert isinstance(o.body, str) and "r_plots/" in o.body and any((tmp_path / "r_plots").iterdir())
    j = report(ReportRequest(str(shared_traces / NCCL), fmt="json", no_plots=True))
    assert j.out is None and j.notes == () and json.loads(body(j))["totals"]["activity_count"] == 3774
    with pytest.raises(UsageError, match="must end in"):
        report(ReportRequest(str(shared_traces / NCCL), fmt="html", out=str(tmp_path / "r.md")))


def test_diff_of_a_trace_with_itself_passes_the_gate(shared_traces: Path) -> None:
    p = str(shared_traces / NCCL)
    o = diff(DiffRequest(p, p, fmt="json", gate_pct="5%"))
    d = json.loads(body(o))
    assert o.error is None and d["gate"]["exit_code"] == 0  # no phase slower: nothing to raise


def test_whatif_of_hand_input(tmp_path: Path) -> None:
    o = whatif(WhatifRequest(prefill_ms=100, tpot_ms=10, decode_steps=100, fmt="json"))
    s = json.loads(body(o))["sensitivity"]
    # one request: 100 ms prefill + 100 steps x 10 ms = 1,100 ms; halving TPOT saves 500 ms, prefill 50
    assert (s["e2el_ms"], s["save_half_tpot_ms"], s["save_half_prefill_ms"]) == (1100.0, 500.0, 50.0)
    with pytest.raises(UsageError, match="give a TRACE_OR_DATASET"):
        whatif(WhatifRequest(prefill_ms=100))


def test_summary_plot_and_label_return_what_their_commands_write(
    shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = shared_traces / NCCL
    s = json.loads(body(summary(SummaryRequest(trace, fmt="json"))))
    assert s["counts"]["device_activity"]["kernel"] > 0 and s["distributed"]["world_size"] == 2
    assert body(summary(SummaryRequest(trace))).startswith(b"trace ")
    p = plot(PlotRequest("timeline", str(trace), str(tmp_path / "t.svg")))
    assert p.fmt == "bytes" and p.out == tmp_path / "t.svg" and body(p).lstrip().startswith(b"<?xml")
    assert p.notes == (f"wrote {tmp_path / 't.svg'}",)
    lab = label(LabelRequest(str(trace), str(tmp_path / "l.json.gz")))
    assert lab.fmt == "bytes" and body(lab)[:2] == b"\x1f\x8b" and "regions labelled" in lab.notes[0]
    assert capsys.readouterr() == ("", "")  # the services never print, nor write the files
    assert not (tmp_path / "t.svg").exists() and not (tmp_path / "l.json.gz").exists()
    with pytest.raises(UsageError, match="must end in"):
        plot(PlotRequest("timeline", str(trace), str(tmp_path / "t.pdf")))
