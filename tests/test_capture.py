"""Graph-capture merge (tracekit/sources/kineto/capture/merge.py) on the shared vLLM and SGLang traces,
checked against the capture traces themselves and TraceLens' reference CSVs beside them."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.attribution.core import attribute
from tracekit.costmodel.ops import trace_costs
from tracekit.sources import load
from tracekit.sources.kineto.capture.merge import merge_captures
from tracekit.sources.kineto.capture.files import discover

VLLM = "kineto/tracelens/inference/vllm_decode_full"
SGLANG = "kineto/tracelens/inference/sglang_decode"


def _ref(shared: Path, folder: str, table: str) -> list[dict[str, str]]:
    with open(shared / folder / "perf_csvs" / f"{table}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _captured_kernel_names(path: Path) -> list[str]:
    """Independent reading of a capture trace: the kernel names of the launch calls between
    BeginCapture and EndCapture, in call order (plain json, no tracekit)."""
    ev = json.load(gzip.open(path))["traceEvents"]
    t0 = next(e["ts"] for e in ev if e.get("name") == "hipStreamBeginCapture")
    t1 = next(e["ts"] for e in ev if e.get("name") == "hipStreamEndCapture")
    calls = [e for e in ev if e.get("cat") == "cuda_runtime" and "kernel" in e.get("args", {}) and t0 <= e["ts"] <= t1]
    return [e["args"]["kernel"] for e in sorted(calls, key=lambda e: e["ts"])]


@pytest.mark.parametrize(
    "folder,trace,nodes", [(VLLM, "graph_execution.json.gz", 421), (SGLANG, "sglang_Qwen3-8B_decode.json.gz", 544)]
)
def test_replay_matches_the_capture_node_for_node(shared_traces: Path, folder: str, trace: str, nodes: int) -> None:
    path = shared_traces / folder / trace
    caps = discover(path)
    assert len(caps) == 1 and caps[0].parent.name == "capture_traces"
    bare = load(path, discover_captures=False)
    merged = merge_captures(bare, caps)
    info = merged.meta["capture"]
    assert info["mapped_launches"] == 1 and info["mapped_kernels"] == nodes
    assert info["launches"][0]["how"] == "node sequence" and info["launches"][0]["batch"] == 32
    # Kernels: same rows, same times; only the replayed ones changed correlation.
    assert merged.kernels.drop("correlation", "external_id").equals(bare.kernels.drop("correlation", "external_id"))
    node_calls = merged.launches.filter(pl.col("name").str.ends_with(":node"))
    assert node_calls.height == nodes and (node_calls["start_ns"] == node_calls["end_ns"]).all()
    graph = bare.launches.filter(pl.col("name") == "hipGraphLaunch").row(0, named=True)
    assert node_calls["start_ns"].is_between(graph["start_ns"], graph["end_ns"]).all()
    # Each replayed kernel's new launch is the node of the same position: names equal the
    # capture's launch calls in order (read here with plain json).
    acts = attribute(merged).activities.filter(pl.col("launch_name") == "hipGraphLaunch:node").sort("start_ns")
    assert acts["name"].to_list() == _captured_kernel_names(caps[0])
    assert (acts["op_link"] == "external id").all() and acts["region_name"].n_unique() == 1


def test_step_prices_and_reference_csvs(shared_traces: Path) -> None:
    """Per-call FLOPs/bytes of the replayed paged-attention and MoE ops against TraceLens."""
    tr = tracekit.load(str(shared_traces / VLLM / "graph_execution.json.gz"))
    costs = trace_costs(tr, attribute(tr).activities)
    att = costs.filter(pl.col("name") == "vllm::unified_attention_with_output")
    ref = _ref(shared_traces, VLLM, "InferenceAttention_fwd")[0]
    # 24 layers; step sums g_sq=32, g_sk=55086, sqsk=55086; H_q=64, H_kv=8, d=64:
    # 2·64·(64+64)·55086 = 902,529,024 FLOPs; bytes 2·(64·64·32 + 8·128·55086 + 64·64·32) = 113,340,416.
    assert att.height == 24 and set(att["flops"]) == {902_529_024.0} and set(att["bytes"]) == {113_340_416.0}
    assert float(ref["GFLOPS_first"]) * 1e9 == pytest.approx(902_529_024.0, rel=1e-12)
    assert float(ref["Data Moved (MB)_first"]) * 2**20 == pytest.approx(113_340_416.0, rel=1e-12)
    moe = costs.filter(pl.col("name") == "vllm::moe_forward")
    up, down = _ref(shared_traces, VLLM, "MoE_unfused_fwd")[:2]
    if up["name"].endswith("down"):
        up, down = down, up
    want_f = (float(up["GFLOPS_first"]) + float(down["GFLOPS_first"])) * 1e9
    want_b = (float(up["Data Moved (MB)_first"]) + float(down["Data Moved (MB)_first"])) * 2**20
    # T=32, H=I=3072 (TraceLens' convention), E=32, top-4 from the TopK op, mxfp4 weights (0.5 B):
    # 2·32·4·3072·3072·(2+1) = 7,247,757,312 FLOPs.
    assert moe.height == 24 and set(moe["flops"]) == {7_247_757_312.0} and want_f == pytest.approx(7_247_757_312.0)
    assert moe["bytes"][0] == pytest.approx(want_b, rel=1e-9)
    # SGLang: 36 layers, H_q=32, H_kv=8, d=128, g_sk=32785 → 2·32·256·32785 = 537,149,440.
    tr = tracekit.load(str(shared_traces / SGLANG / "sglang_Qwen3-8B_decode.json.gz"))
    costs = trace_costs(tr, attribute(tr).activities)
    att = costs.filter(pl.col("name").str.starts_with("sglang_profiler::attention_paged_attention_ragged"))
    ref = _ref(shared_traces, SGLANG, "InferenceAttention_fwd")[0]
    assert att.height == 36 and set(att["flops"]) == {float(ref["GFLOPS_first"]) * 1e9}
    # Bytes: 2·(32·128·32 + 8·256·32785 + 32·128·32) = 134,811,648; TraceLens has 4,096 fewer
    # (0.003 %: one KV token of one head less), within 1 %.
    assert set(att["bytes"]) == {134_811_648.0}
    assert float(ref["Data Moved (MB)_first"]) * 2**20 == pytest.approx(134_811_648.0, rel=1e-4)
    rope = costs.filter(pl.col("name") == "sgl_kernel::rotary_embedding")
    ref = _ref(shared_traces, SGLANG, "RoPE_fwd")[0]
    # 3·32·(4096 + 1024) = 491,520 FLOPs; q and k read and written: 2·2·32·5120 = 655,360 bytes.
    assert set(rope["flops"]) == {491_520.0} and float(ref["GFLOPS_first"]) * 1e9 == pytest.approx(491_520.0, rel=1e-12)
    assert set(rope["bytes"]) == {655_360.0} and float(ref["Data Moved (MB)_first"]) * 2**20 == pytest.approx(655_360.0)


@pytest.mark.parametrize(
    "folder,trace", [(VLLM, "graph_execution.json.gz"), (SGLANG, "sglang_Qwen3-8B_decode.json.gz")]
)
def test_steps_get_a_verdict(shared_traces: Path, folder: str, trace: str) -> None:
    res = analyze(tracekit.load(str(shared_traces / folder / trace)))
    assert res.regions.height and (res.regions["coverage"] >= 0.9).all()
    assert "unknown" not in res.regions["bound"].to_list()
    assert not any(w.startswith("graph replay without capture trace") for w in res.warnings)


def test_capture_of_another_run_maps_nothing(shared_traces: Path) -> None:
    bare = load(shared_traces / SGLANG / "sglang_Qwen3-8B_decode.json.gz", discover_captures=False)
    merged = merge_captures(bare, discover(shared_traces / VLLM / "graph_execution.json.gz"))
    assert merged.kernels.equals(bare.kernels) and merged.ops.equals(bare.ops) and merged.launches.equals(bare.launches)
    w = [x for x in merged.meta["warnings"] if x.startswith("capture:")]
    assert w == [
        "capture: 1 graph replay: 1 not mapped (544 kernels, 9.66 ms, left on their graph launch); first not "
        "mapped: 544 replayed nodes; no captured graph of key 32 has the same nodes (captured graphs: 421 nodes)"
    ]
    res = analyze(merged)
    note = [x for x in res.warnings if x.startswith("graph replay without capture trace")]
    assert note and "544 kernels, 9.66 ms" in note[0]
    # The capture was given: the advice says why it did not map, not "pass --capture".
    assert "--capture FILE" not in note[0] and "1 capture file read, but they did not match: 544 replayed" in note[0]


def test_dataset_keeps_the_merge(shared_traces: Path, tmp_path: Path) -> None:
    from cli_run import tk_out

    src = shared_traces / VLLM / "graph_execution.json.gz"
    out = tmp_path / "ds"
    tk_out("ingest", src, "--out", out)
    ds = tracekit.load(str(out))
    assert ds.meta["capture"]["mapped_kernels"] == 421
    # The dataset's op-cost table holds the replayed ops' per-call costs (TraceLens: 0.902529024 GFLOP).
    stored = pl.read_parquet(next((out / "op_costs").glob("trace_id=*/data.parquet")))
    priced = ds.ops.select("op_id", "name").join(stored, on="op_id")
    att = priced.filter(pl.col("name") == "vllm::unified_attention_with_output")
    moe = priced.filter(pl.col("name") == "vllm::moe_forward")
    assert att.height == 24 and set(att["flops"]) == {902_529_024.0}
    assert moe.height == 24 and set(moe["flops"]) == {7_247_757_312.0}
    a = analyze(ds)
    b = analyze(tracekit.load(str(src)))
    assert a.regions["coverage"].to_list() == b.regions["coverage"].to_list()
    assert a.regions["flops"].to_list() == b.regions["flops"].to_list()


def test_low_coverage_prints_dashes_not_numbers(shared_traces: Path) -> None:
    """SGLang decode without its capture: coverage 0.3 % → FLOPs, bytes and rates print as "–"
    in the table, Markdown and HTML; the JSON keeps the values with the coverage beside them."""
    from tracekit.report.screens.analyze import render
    from tracekit.report.sections.registry import report_sections
    from tracekit.report.from_path import report_data

    tr = load(shared_traces / SGLANG / "sglang_Qwen3-8B_decode.json.gz", discover_captures=False)
    res = analyze(tr)
    doc = res.to_json()
    whole = doc["totals"]["trace"]
    assert whole["coverage"] < 0.01 and whole["flops"] is not None and whole["flops"] > 0
    text = render(doc)
    row = text.split("Whole trace")[1].splitlines()[4].split()  # "474 ms  2 %  556  558  –  …"
    # span, busy, gaps, kernels, then FLOPs bytes FLOP/B FLOP/s B/s all "–", then the coverage
    assert row[6:11] == ["–"] * 5 and row[11] == "0.3"
    secs = {s.title: s for s in report_sections(report_data(tr, res))}
    reg = secs["Regions"].tables[0]
    fl = reg.headers.index(next(h for h in reg.headers if h.lower().startswith("flop")))
    assert all(r[fl] == "–" for r in reg.rows)
    # With the capture the same cells are numbers.
    res = analyze(tracekit.load(str(shared_traces / SGLANG / "sglang_Qwen3-8B_decode.json.gz")))
    reg = {s.title: s for s in report_sections(report_data(tr, res))}["Regions"].tables[0]
    assert all(r[fl] != "–" for r in reg.rows)


def _copy_capture(src: Path, dst: Path, strip_kernel_names: bool = False) -> None:
    doc = json.load(gzip.open(src))
    if strip_kernel_names:  # what a CUDA capture records: no kernel name on the launch call
        for e in doc["traceEvents"]:
            if e.get("cat") == "cuda_runtime":
                e.get("args", {}).pop("kernel", None)
    with gzip.open(dst, "wt") as fh:
        json.dump(doc, fh)


def test_capture_without_kernel_names_matches_by_kind(shared_traces: Path, tmp_path: Path) -> None:
    cap = discover(shared_traces / VLLM / "graph_execution.json.gz")[0]
    _copy_capture(cap, tmp_path / "cuda_like.json.gz", strip_kernel_names=True)
    bare = load(shared_traces / VLLM / "graph_execution.json.gz", discover_captures=False)
    merged = merge_captures(bare, [tmp_path / "cuda_like.json.gz"])
    row = merged.meta["capture"]["launches"][0]
    assert (
        row["how"] == "node kinds in order (capture names no kernels)"
        and merged.meta["capture"]["mapped_kernels"] == 421
    )
    named = merge_captures(bare, [cap])
    # Same pairing as by names: every replayed kernel gets the same captured op.
    a = attribute(merged).activities.sort("act_id")["op_name"]
    b = attribute(named).activities.sort("act_id")["op_name"]
    assert a.equals(b)


@pytest.mark.slow  # > 10 s on this 2-core machine
def test_batch_size_tells_identical_graphs_apart(shared_traces: Path, tmp_path: Path) -> None:
    cap = discover(shared_traces / VLLM / "graph_execution.json.gz")[0]
    d = tmp_path / "capture_traces"
    d.mkdir()
    for name in ("a.json.gz", "b.json.gz"):
        _copy_capture(cap, d / name)
    bare = load(shared_traces / VLLM / "graph_execution.json.gz", discover_captures=False)
    # The step is execute_32_…: the graph captured for batch 32 is the one.
    (d / "execution_details.json").write_text(
        json.dumps(
            [
                {"file": "a.json.gz", "batch_size": 16, "mode": "FULL"},
                {"file": "b.json.gz", "batch_size": 32, "mode": "FULL"},
            ]
        )
    )
    merged = merge_captures(bare, [d / "a.json.gz", d / "b.json.gz"])
    row = merged.meta["capture"]["launches"][0]
    assert row["file"].endswith("b.json.gz") and merged.meta["capture"]["mapped_kernels"] == 421
    # Both captured for batch 32: two candidates, nothing mapped, and the warning says why.
    (d / "execution_details.json").write_text(
        json.dumps(
            [
                {"file": "a.json.gz", "batch_size": 32, "mode": "FULL"},
                {"file": "b.json.gz", "batch_size": 32, "mode": "FULL"},
            ]
        )
    )
    merged = merge_captures(bare, [d / "a.json.gz", d / "b.json.gz"])
    assert merged.kernels.equals(bare.kernels) and merged.meta["capture"]["mapped_kernels"] == 0
    w = [x for x in merged.meta["warnings"] if x.startswith("capture:")]
    assert w and "2 captured graphs in 2 capture files have these 421 nodes for graph key 32: the files overlap" in w[0]
