"""tracekit label: the trace written back with phases/verdicts; reloading it loses nothing."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import run_cli, write_tiny_trace  # noqa: E402

import tracekit  # noqa: E402
from tracekit.report.label import ts_to_ns  # noqa: E402


JSON_TEXT = ("input_dims", "input_strides")  # raw JSON text: the writer re-serialises it compactly


def _same_tables(a: tracekit.Trace, b: tracekit.Trace) -> None:
    for name in ("kernels", "launches", "ops", "regions"):
        fa, fb = a.table(name).drop("trace_id"), b.table(name).drop("trace_id")
        assert fa.height == fb.height, name
        text = [c for c in JSON_TEXT if c in fa.columns]
        assert fa.drop(text).equals(fb.drop(text)), name
        for c in text:  # same values, whitespace aside
            assert [json.loads(v) if v else v for v in fa[c].to_list()] == [json.loads(v) if v else v for v in fb[c].to_list()], c


def test_ts_to_ns_matches_loader_rule() -> None:
    assert ts_to_ns(5172723568236.703, 0) == 5172723568236703
    assert ts_to_ns(12, 5) == 12005
    assert ts_to_ns("1.5", 0) == 1500
    assert ts_to_ns(None, 0) is None


def test_label_tiny_trace(tmp_path: Path) -> None:
    src = write_tiny_trace(tmp_path / "tiny.json")
    out = tmp_path / "labelled.json"
    assert run_cli(["label", str(src), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    ann = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    # the three annotations of the tiny trace, in order: prefill, decode, decode
    assert [e["args"]["tk_phase"] for e in ann] == ["prefill", "decode", "decode"]
    assert all(e["args"]["tk_bound"] and e["args"]["tk_reason"] for e in ann)
    tracks = [e for e in doc["traceEvents"] if e.get("cat") == "tracekit"]
    # one event per region on its phase's track, over the device span: prefill kernel 200–230 µs
    assert [(e["name"].split(":")[0], e["ts"], e["dur"]) for e in tracks] == [("prefill", 200.0, 30.0), ("decode", 400.0, 10.0), ("decode", 600.0, 5.0)]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert {"phase: prefill", "phase: decode"} <= names
    assert doc["tracekit_label"] == {"version": 1, "regions_labelled": 3, "regions_unmatched": 0}
    a, b = tracekit.load(str(src)), tracekit.load(str(out))
    _same_tables(a, b)
    # the 3 new events are read and skipped (category not modelled), not dropped as bad
    assert b.meta["parse_stats"]["skipped"]["tracekit [X]"] == 3
    assert b.meta["parse_stats"]["events_read"] == a.meta["parse_stats"]["events_read"] + 3 + 4  # 3 X + 4 M events


def test_label_real_trace_gz_loses_nothing(tmp_path: Path, shared_traces: Path) -> None:
    src = shared_traces / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
    out = tmp_path / "sglang.labelled.json.gz"
    assert run_cli(["label", str(src), "--out", str(out)]) == 0
    with gzip.open(out) as fh:
        doc = json.load(fh)
    assert doc["tracekit_label"]["regions_unmatched"] == 0
    labelled = [e for e in doc["traceEvents"] if isinstance(e.get("args"), dict) and "tk_phase" in e["args"]]
    assert labelled and {e["args"]["tk_phase"] for e in labelled} >= {"prefill"}
    a, b = tracekit.load(str(src)), tracekit.load(str(out))
    _same_tables(a, b)
    # every original event is still there: events read grows by exactly the events we added
    new_pid = next(e["pid"] for e in doc["traceEvents"] if e.get("cat") == "tracekit")
    added = sum(1 for e in doc["traceEvents"] if e.get("pid") == new_pid)
    assert b.meta["parse_stats"]["events_read"] == a.meta["parse_stats"]["events_read"] + added


def test_label_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_tiny_trace(tmp_path / "tiny.json")
    out = tmp_path / "x.json"
    out.write_text("{}")
    assert run_cli(["label", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists; pass --force" in err and "Traceback" not in err and err.count("\n") == 1
    assert run_cli(["label", str(src), "--out", str(tmp_path / "nodir" / "x.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert run_cli(["label", str(src), "--out", str(tmp_path / "x.txt")]) == 2
    assert ".json or .json.gz" in capsys.readouterr().err
    assert run_cli(["label", str(src), "--out", str(out), "--force"]) == 0
    assert pl.DataFrame(json.loads(out.read_text())["traceEvents"], strict=False).height > 0
