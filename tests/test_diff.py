"""tracekit diff: pure frame functions with hand-derived deltas, and the CLI on real pairs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk, tk_out  # noqa: E402
from test_report_helpers import sample_doc, write_tiny_trace  # noqa: E402

from tracekit.report import diff, model  # noqa: E402


def _pair() -> tuple[model.ReportData, model.ReportData]:
    a = model.from_json(sample_doc())
    doc = sample_doc()
    doc["phases"][1]["busy_ns"] = 6_000_000.0  # decode busy 4.5 ms → 6 ms: +1.5 ms, +33.3 %
    doc["phases"][1]["bound"] = "bandwidth"
    doc["regions"].append(dict(doc["regions"][1], name="tk:decode step=4 ctx=400", span_ns=5_000_000))
    return a, model.from_json(doc)


def test_phase_deltas_by_hand() -> None:
    a, b = _pair()
    d = diff.phase_diff(a, b)
    row = d.filter((pl.col("phase") == "decode") & (pl.col("metric") == "busy_ns")).row(0, named=True)
    assert (row["a"], row["b"], row["delta"]) == (4_500_000.0, 6_000_000.0, 1_500_000.0)
    assert row["change"] == pytest.approx(1 / 3)
    # TPOT percentiles are compared too (same on both sides: delta 0)
    tp = d.filter((pl.col("phase") == "decode") & (pl.col("metric") == "tpot_p50_ms")).row(0, named=True)
    assert (tp["a"], tp["delta"]) == (5.0, 0.0)
    assert d["phase"].unique(maintain_order=True).to_list()[:2] == ["whole trace", "prefill"]


def test_verdict_change() -> None:
    a, b = _pair()
    v = diff.verdict_diff(a, b)
    dec = v.filter(pl.col("phase") == "decode").row(0, named=True)
    assert (dec["bound_a"], dec["bound_b"], dec["changed"]) == ("overhead", "bandwidth", True)
    assert not v.filter(pl.col("phase") == "prefill")["changed"][0]


def test_region_kinds_line_up_steps() -> None:
    a, b = _pair()
    r = diff.region_diff(a, b)
    # "tk:decode step=N ctx=N [decode]": 3 regions before, 4 after; span sum 9 ms → 14 ms
    kind = "tk:decode step=N ctx=N [decode]"
    cnt = r.filter((pl.col("kind") == kind) & (pl.col("metric") == "count")).row(0, named=True)
    assert (cnt["a"], cnt["b"]) == (3.0, 4.0)
    span = r.filter((pl.col("kind") == kind) & (pl.col("metric") == "span_ns")).row(0, named=True)
    assert (span["a"], span["b"]) == (9_000_000.0, 14_000_000.0)


def test_moved_kernels() -> None:
    ka = pl.DataFrame({"name": ["gemm", "attn", "gone"], "count": [2, 1, 1], "time_ns": [100, 50, 30]})
    kb = pl.DataFrame({"name": ["gemm", "attn", "new"], "count": [2, 1, 1], "time_ns": [160, 45, 10]})
    m = diff.moved(ka, kb)
    # |Δ|: gemm 60, gone 30, new 10, attn 5
    assert m["name"].to_list() == ["gemm", "gone", "new", "attn"]
    assert m.filter(pl.col("name") == "new")["change"][0] is None
    assert m.filter(pl.col("name") == "gone")["delta_ns"][0] == -30
    k = diff.name_totals(pl.DataFrame({"name": ["x", "x", "y"], "start_ns": [0, 10, 0], "end_ns": [5, 12, 1]}))
    assert sorted(k.rows()) == [("x", 2, 7), ("y", 1, 1)]


def test_cli_diff_h100_vs_mi300x(shared_traces: Path) -> None:
    base = shared_traces / "kineto/tracelens"
    a = base / "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    b = base / "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    out = json.loads(tk_out("diff", a, b, "--format", "json"))
    whole = {r["metric"]: r for r in out["phases"] if r["phase"] == "whole trace"}
    # the same forward on two GPUs: identical FLOPs (same shapes), different time
    assert whole["flops"]["delta"] == 0 and whole["flops"]["a"] > 0
    assert whole["busy_ns"]["a"] != whole["busy_ns"]["b"]
    # CUDA and ROCm kernels share no names, so the biggest movers appear on one side only
    assert any(k["count_a"] == 0 for k in out["kernels"]) and any(k["count_b"] == 0 for k in out["kernels"])
    ops = {o["name"]: o for o in out["ops"]}
    assert "aten::mm" in ops and ops["aten::mm"]["count_a"] == ops["aten::mm"]["count_b"]
    text = tk_out("diff", a, b)
    assert "verdicts" in text and "kernels that moved most" in text


def test_cli_diff_md_and_bad_input(tmp_path: Path) -> None:
    t = write_tiny_trace(tmp_path / "t.json")
    out = tmp_path / "d.md"
    tk_out("diff", t, t, "--format", "md", "--out", out)
    text = out.read_text()
    assert text.startswith("# tracekit diff") and "&lt;script&gt;" in text and "<script>" not in text
    code, _, err = tk("diff", t, tmp_path / "missing.json")
    assert code != 0
    assert "missing.json" in err and "Traceback" not in err


def test_cli_diff_matches_ops_across_kernel_families(shared_traces: Path) -> None:
    base = shared_traces / "kineto/tracelens"
    a = base / "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    b = base / "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    out = json.loads(tk_out("diff", a, b, "--format", "json"))
    rows = {(r["op"], r["shape"]): r for r in out["matched_ops"]}
    # Qwen1.5-0.5B, 24 layers, batch 16 × 559 tokens = 8,944 rows: the gate and up projections
    # are two aten::mm [8944,1024]×[1024,2816] per layer, 48 calls on either GPU, done by a cuBLAS
    # sm90_xmma kernel on the H100 and a hipBLASLt Cijk_ kernel on the MI300X
    mm = rows[("aten::mm", "[[8944,1024],[1024,2816]]")]
    assert mm["count_a"] == mm["count_b"] == 48 and mm["op_class"] == "gemm"
    assert mm["kernel_a"].startswith("sm90_xmma") and mm["kernel_b"].startswith("Cijk_")
    assert mm["delta_ns"] == mm["time_b_ns"] - mm["time_a_ns"] and mm["time_a_ns"] > 0
    # flash attention: one SDPA call per layer, pytorch_flash on CUDA, attn_fwd on ROCm
    sdpa = next(r for (op, _), r in rows.items() if op == "aten::_scaled_dot_product_flash_attention")
    assert sdpa["count_a"] == sdpa["count_b"] == 24 and sdpa["kernel_b"] == "attn_fwd"
    # every op with shapes is matched; what is left is work no op launched, listed per side
    t = out["work_totals"]
    assert t["matched_a_ns"] > 2 * t["unmatched_a_ns"] and t["matched_b_ns"] > 2 * t["unmatched_b_ns"]
    assert {w["side"] for w in out["unmatched_work"]} == {"A only", "B only"}
    assert all(w["op"] == "(no op)" for w in out["unmatched_work"])
    classes = {c["name"]: c for c in out["op_classes"]}
    assert classes["gemm"]["time_a_ns"] > 0 and classes["gemm"]["time_b_ns"] > 0


def test_cli_gate_on_a_single_inferred_step(shared_traces: Path) -> None:
    base = shared_traces / "kineto/tracelens"
    a = base / "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    b = base / "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    # an H100 run against an MI300X run is not comparable: exit 7, naming the two devices
    r = tk("diff", a, b, "--gate", "5%")
    assert r.code == 7 and "device: NVIDIA H100 80GB HBM3 vs AMD Instinct MI300X VF" in r.err
    assert "(NVIDIA H100 80GB HBM3, bf16)" in r.out and "(AMD Instinct MI300X VF, bf16)" in r.out
    r = tk("diff", a, b, "--format", "json", "--gate", "5%", "--allow-feature-change")
    g = json.loads(r.out)["gate"]
    # one forward, its phase inferred from shapes: one prefill step a side, so the threshold alone,
    # and no TTFT (an inferred phase is not a serving measurement: docs/serving.md)
    metrics = {(c["phase"], c["metric"]) for c in g["checks"]}
    assert metrics == {
        ("prefill", "step time"),
        ("prefill", "busy time"),
        ("prefill", "peak allocated"),  # both traces carry [memory] events (issue 38)
        ("whole trace", "busy time"),
        ("whole trace", "span"),
    }
    assert all(c["ci_low"] is None and c["samples_a"] == 1 for c in g["checks"])
    assert any("threshold alone" in n for n in g["notes"])
    # the MI300X step is faster than the H100's here: B faster never fails the gate on time
    step = next(c for c in g["checks"] if c["metric"] == "step time")
    assert step["change"] < 0 and not step["regressed"]
    # but its prefill peak allocated is 2,219,047,936 B against 2,088,508,416 B: +6.25 % > 5 %
    peak = next(c for c in g["checks"] if c["metric"] == "peak allocated")
    assert (peak["a"], peak["b"]) == (2_088_508_416, 2_219_047_936) and peak["regressed"]
    assert g["exit_code"] == 1 and [c["metric"] for c in g["checks"] if c["regressed"]] == ["peak allocated"]


@pytest.mark.parametrize(
    "rel",
    ["kineto/hta/trace_diff/control/control.json.gz", "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"],
)
def test_region_kinds_from_the_result_equal_those_of_the_document(shared_traces: Path, rel: str) -> None:
    """``tracekit diff`` reads each side's region kinds from the result's columns, never making the
    region rows a document (issue 36: two 100,000-step traces took 2.4 GB): the same kinds as from
    the document's rows, and the rest of the document the same."""
    import tracekit
    from tracekit.analysis import analyze

    result = analyze(tracekit.load(str(shared_traces / rel)))
    doc = result.to_json()
    from_doc = diff.region_kinds(model.from_json(doc).frame("regions"))
    from_columns = diff.region_kinds(result.region_columns(diff.KIND_COLUMNS))
    assert from_doc.height > 0
    assert from_doc.equals(from_columns)
    assert result.to_json_without_regions() == {**doc, "regions": []}
