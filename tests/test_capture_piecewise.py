"""Piecewise CUDA graphs (issue 26, item 1): a constructed vLLM mixed step in the default
(piecewise) compilation mode, with its capture folder (tests/piecewise_trace.py). The step's
graphs are keyed by its token count (8192, the leading number of ``execute_8192_context_9…``,
not its 9 + 37 requests), and the identical middle-layer pieces pair with the captured ones in
order."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl

import tracekit
from tracekit.analysis import analyze
from tracekit.attribution.core import attribute
from tracekit.costmodel.ops import trace_costs
from tracekit.sources import load
from tracekit.sources.kineto.capture.merge import merge_captures

import piecewise_trace as P
from cli_run import tk_out
from kineto_events import write_trace

LAYERS = 5  # pieces: first, 4 identical middle ones, last


def test_piecewise_step_pairs_every_replay(tmp_path: Path) -> None:
    path = P.write_case(tmp_path, LAYERS)
    tr = tracekit.load(str(path))
    cap = tr.meta["capture"]
    # 6 replays: first (rms_norm 100 µs + qkv 400 µs) and last (o 400 + norm 100 + mlp 400 +
    # norm 100) are unique: by sequence, 2 + 4 = 6 kernels, 1.5 ms; the 4 middle ones (o 400, norm
    # 100, mlp 400, norm 100, qkv 400 = 1.4 ms each) pair by order: 20 kernels, 5.6 ms.
    assert cap["paired"] == {
        "sequence": {"launches": 2, "kernels": 6, "ns": 1_500_000},
        "order": {"launches": 4, "kernels": 20, "ns": 5_600_000},
        "none": {"launches": 0, "kernels": 0, "ns": 0},
    }
    rows = sorted(cap["launches"], key=lambda r: r["start_ns"])
    # The decoy (4096) file is listed first: graphs 0-5; the 8192 capture's are 6-11, in order.
    assert [r["graph"] for r in rows] == [6, 7, 8, 9, 10, 11]
    assert {r["batch"] for r in rows} == {8192} and {r["gkey"] for r in rows} == {8192}
    assert [r["paired"] for r in rows] == ["sequence"] + ["order"] * 4 + ["sequence"]
    assert [w for w in tr.meta["warnings"] if w.startswith("capture:")] == [
        "capture: 6 graph replays: 2 paired by node sequence (6 kernels, 1.5 ms), 4 paired by capture order "
        "among graphs with identical nodes (20 kernels, 5.6 ms)"
    ]
    costs = trace_costs(tr, attribute(tr).activities)
    # The QKV GEMM of the 8192 capture: 2·8192·4096·(32 + 2·8)·128 = 412,316,860,416 FLOPs (the
    # decoy's would be half). 5 of them: one per layer.
    qkv = costs.join(tr.ops.select("op_id", "input_dims"), on="op_id").filter(
        (pl.col("name") == "aten::mm") & pl.col("input_dims").str.contains("6144")
    )
    assert qkv.height == 5 and set(qkv["flops"]) == {412_316_860_416.0}
    # Paged attention from the step's sums (context + generation): sq = 8192, sk = 45,155,
    # sqsq = 7,400,037, sqsk = 7,437,000; causal pairs = sqsk − (sqsq − sq)/2 = 3,741,077.5;
    # FLOPs = 2·32·(128 + 128)·pairs = 61,293,813,760; bytes = 2·(32·128·8192 + 8·256·45155 +
    # 32·128·8192) = 319,172,608.
    att = costs.filter(pl.col("name") == "vllm::unified_attention_with_output")
    assert att.height == LAYERS and set(att["flops"]) == {61_293_813_760.0} and set(att["bytes"]) == {319_172_608.0}
    res = analyze(tr)
    reg = res.regions.row(0, named=True)
    assert reg["phase"] == "mixed" and reg["coverage"] >= 0.9 and reg["bound"] in ("compute", "bandwidth")
    assert not any(w.startswith("graph replay without capture trace") for w in res.warnings)


def test_kernel_kinds_only_and_capture_option(tmp_path: Path) -> None:
    """A CUDA capture names no kernel on its launch calls: pieces match by node kinds (2, 5 and 4
    nodes), still in order; and the same capture given with --capture (no capture_traces/ folder
    beside the trace, the key from the ``capture_8192_PIECEWISE`` label) maps every replay."""
    path = P.write_case(tmp_path / "a", LAYERS, names=False)
    cap = tracekit.load(str(path)).meta["capture"]
    assert cap["mapped_launches"] == LAYERS + 1 and cap["paired"]["order"]["launches"] == 4
    assert {r["how"] for r in cap["launches"]} == {"node kinds in order (capture names no kernels)"}
    src = tmp_path / "a" / "capture_traces" / "graph_capture_rank_0.8192.pt.trace.json.gz"
    (tmp_path / "b").mkdir()
    shutil.copy(src, tmp_path / "b" / "piece_capture.json.gz")
    alone = write_trace(tmp_path / "b", P.main_events(LAYERS), name="step")
    out = tk_out("analyze", str(alone), "--capture", str(tmp_path / "b" / "piece_capture.json.gz"), "--format", "json")
    doc = json.loads(out)
    reg = doc["regions"][0]
    assert reg["coverage"] >= 0.9 and reg["bound"] in ("compute", "bandwidth")
    assert not any("not mapped" in w or "without capture" in w for w in doc.get("warnings", []))


def test_unmatched_key_says_why(tmp_path: Path) -> None:
    """Only graphs captured for 4096 tokens: the 8192-token step is above every captured key; the
    warning says so, and the analysis does not advise passing --capture (it was given)."""
    d = tmp_path / "capture_traces"
    d.mkdir()
    with gzip.open(d / "c4096.json.gz", "wt") as fh:
        json.dump(P.capture_doc(4096, LAYERS), fh)
    (d / "execution_details.json").write_text(json.dumps([{"file": "c4096.json.gz", "batch_size": 4096}]))
    trace = write_trace(tmp_path, P.main_events(LAYERS), name="step")
    bare = load(trace, discover_captures=False)
    merged = merge_captures(bare, [d / "c4096.json.gz"])
    # 6 replays, 26 kernels, 7.1 ms of kernel time, none mapped.
    assert [w for w in merged.meta["warnings"] if w.startswith("capture:")] == [
        "capture: 6 graph replays: 6 not mapped (26 kernels, 7.1 ms, left on their graph launch); first not "
        "mapped: the step's graph key 8192 is above every captured key (largest 4096)"
    ]
    note = [w for w in analyze(merged).warnings if w.startswith("graph replay without capture trace")]
    assert note and "--capture FILE" not in note[0]
    assert "1 capture file read, but they did not match: the step's graph key 8192 is above" in note[0]


def test_padded_key_rounds_up(tmp_path: Path) -> None:
    """A step of 8000 tokens replays the graphs captured for the next size up (8192), as vLLM
    pads a step to the nearest captured size."""
    d = tmp_path / "capture_traces"
    d.mkdir()
    with gzip.open(d / "c.json.gz", "wt") as fh:
        json.dump(P.capture_doc(P.T, LAYERS), fh)
    step = P.STEP.replace("execute_8192_", "execute_8000_")
    trace = write_trace(tmp_path, P.main_events(LAYERS, step=step), name="step")
    cap = merge_captures(load(trace, discover_captures=False), [d / "c.json.gz"]).meta["capture"]
    assert cap["mapped_launches"] == LAYERS + 1 and {r["gkey"] for r in cap["launches"]} == {8192}
    assert {r["batch"] for r in cap["launches"]} == {8000}


def test_identical_graphs_without_a_key_are_not_paired_by_order(tmp_path: Path) -> None:
    """A capture with no execution_details.json, no capture_<n>_ label and no bs_<n> name: its
    graphs have no key, so identical ones could be several sizes' captures. The unique first and
    last pieces map by sequence; the 4 identical middle ones are refused, saying why."""
    with gzip.open(tmp_path / "cap.json.gz", "wt") as fh:
        json.dump(P.capture_doc(P.T, LAYERS, labelled=False), fh)
    trace = write_trace(tmp_path, P.main_events(LAYERS), name="step")
    cap = merge_captures(load(trace, discover_captures=False), [tmp_path / "cap.json.gz"]).meta["capture"]
    assert cap["paired"]["sequence"]["launches"] == 2 and cap["paired"]["none"]["launches"] == 4
    rows = sorted(cap["launches"], key=lambda r: r["start_ns"])
    assert rows[1]["reason"] == (
        "4 captured graphs have these 5 nodes and no graph key (no execution_details.json entry, "
        "capture_<n>_… label or bs_<n> file name), so the capture order does not pair them"
    )
