"""Values a trace's annotations or the runner's sidecar hold that the tables cannot (issue 28).
Before: a ``tk:`` attribute beyond int64 made labelling fail, so ``analyze`` ended in a traceback
and a plain ``ingest`` refused the whole trace as unreadable; sidecar request fields of the wrong
type (``"many"``) made the analysis fail. Now the value is dropped and counted in one warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


from kineto_events import kernel
from cli_run import tk_out

HUGE = "99999999999999999999"  # > 2^63 - 1 = 9223372036854775807


def _region(name: str, ts: int) -> dict[str, object]:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 20}


@pytest.mark.parametrize("stream", ["--no-stream", "--stream"])
def test_tk_attribute_beyond_int64_is_dropped_and_counted(tmp_path: Path, stream: str) -> None:
    """Two steps: prefill with step=HUGE, decode with ctx=-HUGE and batch=1e400 (no integer at
    all: null as before, not counted). The trace is ingested whole; the prefill keeps batch 1 and
    ctx 4, the decode keeps step 2; two values beyond int64 are counted, ctx first (by name)."""
    trace = tmp_path / "t.json"
    events = [
        kernel(0),
        _region(f"tk:prefill step={HUGE} batch=1 ctx=4", 90),
        _region(f"tk:decode step=2 batch=1e400 ctx=-{HUGE}", 120),
    ]
    trace.write_text(json.dumps({"traceEvents": events}))
    ds = tmp_path / "ds"
    assert "ingested 1 of 1 traces" in tk_out("ingest", str(trace), "--out", str(ds), stream)
    doc = json.loads(tk_out("analyze", str(ds), "--format", "json"))
    want = f"2 tk: attribute values beyond int64 dropped (ctx ×1, step ×1; e.g. ctx=-{HUGE})"
    assert want in doc["totals"]["warnings"]
    regions = {r["phase"]: r for r in doc["regions"]}
    assert (regions["prefill"]["batch"], regions["prefill"]["ctx"]) == (1, 4)
    assert (regions["decode"]["step"], regions["decode"]["batch"], regions["decode"]["ctx"]) == (2, None, None)
    assert (
        json.loads(tk_out("analyze", str(trace), "--format", "json"))["totals"]["warnings"] == doc["totals"]["warnings"]
    )


def test_sidecar_fields_of_wrong_type_or_range(tmp_path: Path) -> None:
    """Six requests: one valid (TTFT 12 ms), the others' bad fields dropped and counted by hand:
    ttft_ms "fast", output_tokens "many" (2); ttft_ms -5, tpot_ns inf, output_tokens 2^70 (3);
    ttft_ms NaN, output_tokens -3, e2el_ms inf (3); ttft_ms 1e308 (beyond 2^62 ns), output_tokens
    2.5 (2): 10 fields; and the item 5, not an object, skipped. The one valid TTFT is the
    sidecar's TTFT row: n 1, p50 12 ms."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [kernel(0), _region("tk:prefill step=0 batch=1", 90)]}))
    (tmp_path / "t.tracekit.json").write_text(
        '{"workload": "llm", "requests": ['
        '{"id": 7, "ttft_ms": 12, "tpot_ms": 2, "output_tokens": 3},'
        '{"id": "x", "ttft_ms": "fast", "output_tokens": "many"},'
        '{"id": 1e400, "ttft_ms": -5, "tpot_ns": 1e400, "output_tokens": 1180591620717411303424},'
        '{"ttft_ms": NaN, "output_tokens": -3, "e2el_ms": Infinity}, 5,'
        '{"ttft_ms": 1e308, "output_tokens": 2.5}]}'
    )
    doc = json.loads(tk_out("analyze", str(trace), "--format", "json"))
    want = (
        "sidecar: 10 request fields of the wrong type or range dropped (e2el_ms, output_tokens, tpot_ns, "
        "ttft_ms), 1 item of 'requests' that are not objects skipped"
    )
    assert want in doc["totals"]["warnings"]
    side = doc["totals"]["latency"]["prefill"]["ttft_sidecar"]
    assert (side["count"], side["p50"]) == (1, 12.0)
    tk_out("report", str(trace), "--format", "md", "--out", str(tmp_path / "r.md"))
