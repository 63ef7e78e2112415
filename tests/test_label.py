"""tracekit label: the trace written back with phases/verdicts by event index; every other byte unchanged."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import msgspec
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest import kineto_trace_files  # noqa: E402
from cli_run import tk  # noqa: E402
from test_report_helpers import write_tiny_trace  # noqa: E402

import tracekit  # noqa: E402
from tracekit.report.screens.label import label_bytes, region_labels  # noqa: E402
from tracekit.report.from_path import analyse_path  # noqa: E402
from tracekit.sources.kineto import writer  # noqa: E402

TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
LIST = msgspec.json.Decoder(list[msgspec.Raw])


def _same_tables(a: tracekit.Trace, b: tracekit.Trace) -> None:
    """Every column of every table equal: the labelled file reloads to exactly the original tables."""
    for name in ("kernels", "launches", "ops", "regions"):
        fa, fb = a.table(name).drop("trace_id"), b.table(name).drop("trace_id")
        assert fa.equals(fb), name


def _events(data: bytes) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw]]:
    if data.lstrip()[:1] == b"[":
        return {}, LIST.decode(data)
    top = TOP.decode(data)
    return top, LIST.decode(top["traceEvents"])


def test_us_text_is_exact() -> None:
    # 1712195495519689047 ns = 1712195495519689.047 µs, which float64 cannot hold (it rounds to …689.0).
    assert bytes(writer.us_text(1712195495519689047)) == b"1712195495519689.047"
    assert bytes(writer.us_text(-1500)) == b"-1.500" and bytes(writer.us_text(7)) == b"0.007"


def test_label_tiny_trace(tmp_path: Path) -> None:
    src = write_tiny_trace(tmp_path / "tiny.json")
    out = tmp_path / "labelled.json"
    assert tk("label", str(src), "--out", str(out)).code == 0
    doc = json.loads(out.read_text())
    ann = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    # the three annotations of the tiny trace, in order: prefill, decode, decode
    assert [e["args"]["tk_phase"] for e in ann] == ["prefill", "decode", "decode"]
    assert all(e["args"]["tk_bound"] and e["args"]["tk_reason"] for e in ann)
    tracks = [e for e in doc["traceEvents"] if e.get("cat") == "tracekit"]
    # one event per region on its phase's track, over its analysed window (docs/analysis.md): prefill
    # CPU 0–100 µs, kernel 200–230, next step at 300 → its period 0–300; decode 1 CPU 300–350, kernel
    # 400–410, next step at 500 → 300–500; decode 2 (the last) CPU 500–550, kernel 600–605 → 500–605.
    assert [(e["name"].split(":")[0], e["ts"], e["dur"]) for e in tracks] == [
        ("prefill", 0.0, 300.0),
        ("decode", 300.0, 200.0),
        ("decode", 500.0, 105.0),
    ]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert {"phase: prefill", "phase: decode"} <= names
    assert doc["tracekit_label"] == {"version": 1, "regions_labelled": 3, "regions_unmatched": 0, "diagnostic": None}
    a, b = tracekit.load(str(src)), tracekit.load(str(out))
    _same_tables(a, b)
    # the 3 new events are read and skipped (category not modelled), not dropped as bad
    assert b.meta["parse_stats"]["skipped"]["tracekit [X]"] == 3
    assert b.meta["parse_stats"]["events_read"] == a.meta["parse_stats"]["events_read"] + 3 + 4  # 3 X + 4 M events
    # Labelling a labelled trace is refused in one line (its events already have tk_ args).
    assert tk("label", str(out), "--out", str(tmp_path / "twice.json")).code == 2


def test_label_cpu_trace_carries_the_diagnostic(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parent.parent / "sample_traces/llm/llm.pt.trace.json.gz"
    out = tmp_path / "llm.labelled.json"
    assert tk("label", str(src), "-o", str(out)).code == 0
    doc = json.loads(out.read_text())
    diag = "CPU diagnostic — not GPU evidence"
    assert doc["tracekit_label"]["diagnostic"] == diag
    labelled = [e for e in doc["traceEvents"] if "tk_phase" in (e.get("args") or {})]
    assert labelled and all(e["args"]["tk_diagnostic"] == diag for e in labelled)
    assert any(e.get("name") == "process_name" and diag in e["args"]["name"] for e in doc["traceEvents"])


def test_ns_resolution_trace_regions_all_found(tmp_path: Path, shared_traces: Path) -> None:
    # Fractional-ns timestamps: the old float re-reading matched 0 of 70 regions and moved kernel starts.
    src = next((shared_traces / "kineto/hta/ns_resolution_trace").glob("*.json.gz"))
    out = tmp_path / "ns.json.gz"
    code, _, msg = tk("label", src, "--out", out)
    assert code == 0
    assert "not found" not in msg
    doc = json.loads(gzip.decompress(out.read_bytes()))
    n = doc["tracekit_label"]["regions_labelled"]
    assert n > 0 and doc["tracekit_label"]["regions_unmatched"] == 0 and f"{n} regions labelled" in msg
    _same_tables(tracekit.load(str(src)), tracekit.load(str(out)))


@pytest.mark.parametrize("path", kineto_trace_files(), ids=lambda p: p.name[:40])
def test_label_round_trip_every_shared_trace(path: Path, tmp_path: Path) -> None:
    """Labelled by event index: every original event's bytes unchanged except the args keys added,
    every other top-level value unchanged, and the reloaded tables (every timestamp) equal."""
    analysed = analyse_path(str(path))
    labels = region_labels(analysed.trace.regions, analysed.result.regions)
    original = writer.read_bytes(path)
    data, stats = label_bytes(original, analysed.trace, labels, analysed.result.diagnostic, str(path))
    assert stats.unmatched == 0 and stats.labelled == labels.height
    top_a, ev_a = _events(original)
    top_b, ev_b = _events(data)
    assert {k: bytes(v) for k, v in top_b.items() if k not in ("traceEvents", "tracekit_label")} == {
        k: bytes(v) for k, v in top_a.items() if k != "traceEvents"
    }
    # Appended at the end: the track events (X) plus their process/thread names (M), all on one new pid.
    added = [msgspec.json.decode(e) for e in ev_b[len(ev_a) :]]
    assert sum(e["ph"] == "X" for e in added) == stats.track_events and len({e["pid"] for e in added}) <= 1
    patched = set(labels["event_index"].to_list())
    for i, (a, b) in enumerate(zip(ev_a, ev_b)):
        if i not in patched:
            assert bytes(a) == bytes(b), i
        else:
            da, db = msgspec.json.decode(a), msgspec.json.decode(b)
            added = {k: v for k, v in db["args"].items() if k not in (da.get("args") or {})}
            assert all(k.startswith("tk_") for k in added) and added.get("tk_phase")
            db["args"] = {k: v for k, v in db["args"].items() if k not in added}
            assert db == {**da, "args": da.get("args") or {}}, i
    out = tmp_path / "l.json"
    out.write_bytes(data)
    # A trace with graph-capture traces beside it was merged with them on load: merge the copy too.
    captures = (analysed.trace.meta.get("capture") or {}).get("files")
    _same_tables(analysed.trace, tracekit.load(str(out), captures=captures))


def test_label_bad_input(tmp_path: Path) -> None:
    src = write_tiny_trace(tmp_path / "tiny.json")
    out = tmp_path / "x.json"
    out.write_text("{}")
    code, _, err = tk("label", src, "--out", out)
    assert code == 2
    assert "already exists; pass --force" in err and "Traceback" not in err and err.count("\n") == 1
    # a missing folder is made, as every --out does; a folder that cannot be made is one line
    assert tk("label", src, "--out", tmp_path / "nodir" / "x.json").code == 0 and (tmp_path / "nodir/x.json").is_file()
    code, _, err = tk("label", src, "--out", out / "sub" / "x.json")  # out is a file: no folder under it
    assert code == 2 and "cannot create the folder" in err and err.count("\n") == 1
    code, _, err = tk("label", src, "--out", tmp_path / "x.txt")
    assert code == 2 and ".json or .json.gz" in err
    assert tk("label", str(src), "--out", str(out), "--force").code == 0
    assert pl.DataFrame(json.loads(out.read_text())["traceEvents"], strict=False).height > 0


@pytest.mark.parametrize("pure", ["1", "0"])
def test_event_index_counts_every_element(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pure: str) -> None:
    # Element 0 is not an event (dropped, counted) and element 2 fails validation (a list as ph):
    # the regions still carry their own positions 1 and 3, in both the native and the msgspec path.
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", pure)
    region = {"ph": "X", "cat": "user_annotation", "name": "tk:decode step=0", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
    doc = {"traceEvents": [5, region, {"ph": ["X"], "name": "bad"}, {**region, "ts": 20}]}
    src = tmp_path / "t.json"
    src.write_text(json.dumps(doc))
    tr = tracekit.load(str(src))
    assert tr.regions["event_index"].to_list() == [1, 3]
    assert sum(tr.meta["parse_stats"]["dropped"].values()) == 2
