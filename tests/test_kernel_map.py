"""An eager trace as the map of a graphed one (issue 39 item 4; tracekit/analysis/kernel_map.py): a
constructed graph-replay decode step (kernels without ops, one ``cudaGraphLaunch``) and its eager
twin (each kernel launched by its op, with Input Dims)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk, tk_out  # noqa: E402

T, H, QKV, FF, V = 4, 4096, 6144, 14336, 32000  # tokens, hidden, QKV width, MLP width, vocabulary


def step_name(t: int) -> str:
    """A vLLM decode step of ``t`` requests, one token each (the step-name grammar gives the tokens)."""
    return f"execute_{t}_context_0(sq0sk0sqsq0sqsk0)_generation_{t}(sq{t}sk2052sqsq{t}sqsk2052)"


BF16 = "c10::BFloat16"


def _mm(k: int, n: int, kern: str, us: float) -> tuple[str, str, list[Any], list[str], float]:
    return ("aten::mm", kern, [[T, k], [k, n]], [BF16, BF16], us)


RMS = ("_C::rms_norm", "rms_norm_kernel", [[T, H], [T, H], [H], []], [BF16, BF16, BF16, "double"], 5.0)
# one layer (op, kernel, Input Dims, Input type, kernel µs): as tests/test_layers.py's, each kernel an op
LAYER = [
    RMS,
    _mm(H, QKV, "sm90_xmma_gemm_bf16bf16_qkv", 20.0),
    ("vllm::unified_attention", "flash_fwd_splitkv_kernel", [[T, 32, 128]], [BF16], 30.0),
    _mm(H, H, "sm90_xmma_gemm_bf16bf16_o", 10.0),
    RMS,
    _mm(H, 2 * FF, "sm90_xmma_gemm_bf16bf16_up", 40.0),
    _mm(FF, H, "sm90_xmma_gemm_bf16bf16_down", 40.0),
]
HEAD = [("aten::embedding", "embedding_kernel", [[V, H], [T]], [BF16, "long int"], 8.0)]
TAIL = [
    RMS,
    _mm(H, V, "sm90_xmma_gemm_bf16bf16_lm_head", 60.0),
    ("aten::argmax", "argmax_kernel", [[T, V]], [BF16], 4.0),
]


def model_trace(layers: int, graphed: bool, rename: dict[str, str] | None = None, tokens: int = T) -> dict[str, Any]:
    """One decode step of ``tokens`` (its name; the kernels' shapes are always ``T``'s): eager (each
    kernel launched by its op) or graphed (one ``cudaGraphLaunch`` whose kernels have no op);
    ``rename`` renames kernels."""
    nodes = HEAD + LAYER * layers + TAIL
    ev: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": step_name(tokens),
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 20 * len(nodes) + 10,
        }
    ]
    t = 20.0 * len(nodes) + 20
    if graphed:
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 2, "dur": 5,
                   "args": {"correlation": 1}})  # fmt: skip
    for c, (op, kern, dims, types, us) in enumerate(nodes, start=1):
        corr = 1 if graphed else c
        if not graphed:
            args = {"External id": c, "Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)}
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 1 + 20 * c, "dur": 10,
                       "args": args})  # fmt: skip
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 3 + 20 * c, "dur": 5, "args": {"correlation": c, "External id": c}})  # fmt: skip
        name = (rename or {}).get(kern, kern)
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t, "dur": us,
                   "args": {"correlation": corr, "device": 0, "stream": 7}})  # fmt: skip
        t += us
    props = [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85899345920, "computeMajor": 9, "numSms": 132}
    ]
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": ev}


def write(folder: Path, name: str, doc: dict[str, Any]) -> Path:
    p = folder / f"{name}.json"
    p.write_text(json.dumps(doc))
    return p


def work(doc: dict[str, Any]) -> tuple[float, float]:
    t = doc["totals"]["trace"]
    return t["flops"], t["bytes"]


def test_the_graphed_trace_takes_its_eager_twins_costs(tmp_path: Path) -> None:
    eager = write(tmp_path, "eager", model_trace(12, graphed=False))
    graphed = write(tmp_path, "graphed", model_trace(12, graphed=True))
    e = json.loads(tk_out("analyze", eager, "--format", "json"))
    alone = json.loads(tk_out("analyze", graphed, "--format", "json"))
    assert not alone["totals"]["trace"]["flops"]  # no op, no cost
    doc = json.loads(tk_out("analyze", graphed, "--map", eager, "--format", "json"))
    # by hand: the GEMMs, per layer 2·T·(H·QKV + H·H + H·2FF + FF·H), and the head 2·T·H·V; the 25
    # RMSNorms 4·T·H + 2·T each; attention and argmax have no cost model (in either trace)
    gemm = 2 * T * (H * QKV + H * H + H * 2 * FF + FF * H) * 12 + 2 * T * H * V
    assert work(e)[0] == gemm + 25 * (4 * T * H + 2 * T) == 21_988_180_168
    f, b = work(doc)
    assert f == pytest.approx(work(e)[0], rel=0.02) and b == pytest.approx(work(e)[1], rel=0.02)
    assert doc["totals"]["trace"]["coverage"] == pytest.approx(e["totals"]["trace"]["coverage"])
    m = doc["totals"]["mapped"]
    # every kernel of the step is mapped: 1 + 12 × 7 + 3 = 88 kernels, 8 + 12 × 150 + 69 = 1,877 µs
    assert (m["mapped_kernels"], m["mapped_ns"], m["unmapped_kernels"]) == (88, 1_877_000, 0)
    assert m["coverage"] == 1.0 and m["layers"] == [{"phase": "decode", "trace": 12, "map_phase": "decode", "map": 12}]
    text = tk_out("analyze", graphed, "--map", eager)
    assert f"costs mapped from {eager} (not measured): 88 kernels, 100.0 % of the steps' device time" in text
    out = tmp_path / "r.md"
    assert tk("report", graphed, "--map", eager, "--no-plots", "--out", out).code == 0
    assert "eager.json (not measured): 88 kernels" in out.read_text()  # the path as Markdown escapes it


def test_a_mismatched_twin_says_what_it_could_not_map(tmp_path: Path) -> None:
    eager = write(tmp_path, "eager", model_trace(10, graphed=False))
    renamed = {"sm90_xmma_gemm_bf16bf16_up": "sm90_xmma_gemm_bf16bf16_up_v2"}
    graphed = write(tmp_path, "graphed", model_trace(12, graphed=True, rename=renamed))
    run = tk("analyze", graphed, "--map", eager, "--format", "json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    m = doc["totals"]["mapped"]
    # no counterpart: layers 10 and 11 (2 × 7 kernels, 2 × 150 µs); name differs: the up GEMM of
    # layers 0–9 (10 × 40 µs); mapped: the other 88 − 14 − 10 = 64 kernels, 1,877 − 300 − 400 = 1,177 µs
    assert m["no_counterpart"] == {"kernels": 14, "ns": 300_000}
    assert m["name_differs"] == {"kernels": 10, "ns": 400_000}
    assert (m["mapped_kernels"], m["mapped_ns"]) == (64, 1_177_000)
    assert m["coverage"] == pytest.approx(1177 / 1877)
    warned = doc["totals"]["warnings"]
    assert any("24 kernels (700 µs) without a cost of their own could not be mapped" in w for w in warned), warned
    assert any("decode steps have 12 layers here but the map's decode step 10 layers" in w for w in warned)


def test_a_graphed_step_of_another_batch_is_repriced_at_its_shapes(tmp_path: Path) -> None:
    eager = write(tmp_path, "eager", model_trace(12, graphed=False))
    graphed = write(tmp_path, "graphed", model_trace(12, graphed=True, tokens=2 * T))
    doc = json.loads(tk_out("analyze", graphed, "--map", eager, "--format", "json"))
    # the map's ops re-priced with their leading dim T → 2T: the GEMMs' FLOPs 2·(2T)·k·n double, the
    # norms' 4·(2T)·H + 2·(2T) too; bytes: the weights (k·n·2 B) stay, the activations double
    gemm = 2 * (2 * T) * (H * QKV + H * H + H * 2 * FF + FF * H) * 12 + 2 * (2 * T) * H * V
    assert work(doc)[0] == gemm + 25 * (4 * 2 * T * H + 2 * 2 * T)
    m = doc["totals"]["mapped"]
    assert (m["repriced_kernels"], m["scaled_kernels"], m["batch_assumed_kernels"]) == (75, 0, 0)
    by = {r["shape"]: r for r in doc["totals"]["top_shapes"]}
    down = by[f"[[{2 * T},{FF}],[{FF},{H}]]"]  # the down projection at 2T tokens, 12 calls
    assert down["count"] == 12 and down["bytes"] == 12 * 2 * (2 * T * FF + FF * H + 2 * T * H)


def test_a_real_eager_trace_maps_its_own_kernels_stripped_of_ops(shared_traces: Path, tmp_path: Path) -> None:
    # the H100 Qwen1.5-0.5B forward (batch 16 × 559 = 8,944 tokens, 24 layers): its step named in
    # vLLM's grammar (a prefill of 8,944 tokens), once with its ops and once without (kernels with
    # no op, as a graph replay's): the stripped trace with the eager one as its map has its FLOPs
    # and bytes
    import gzip

    with gzip.open(shared_traces / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz") as fh:
        doc = json.loads(fh.read())
    sq2 = 16 * 559 * 559
    for e in doc["traceEvents"]:
        if e.get("cat") == "user_annotation":
            e["name"] = f"execute_8944_context_16(sq8944sk8944sqsq{sq2}sqsk{sq2})_generation_0(sq0sk0sqsq0sqsk0)"
    eager = write(tmp_path, "eager", doc)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("cpu_op", "python_function")]
    bare = write(tmp_path, "bare", doc)
    e = json.loads(tk_out("analyze", eager, "--format", "json"))
    m = json.loads(tk_out("analyze", bare, "--map", eager, "--format", "json"))
    assert work(m)[0] == pytest.approx(work(e)[0], rel=0.02) and work(m)[1] == pytest.approx(work(e)[1], rel=0.02)
    mapped = m["totals"]["mapped"]
    assert mapped["coverage"] == 1.0 and mapped["unmapped_kernels"] == 0
    assert mapped["layers"] == [{"phase": "prefill", "trace": 24, "map_phase": "prefill", "map": 24}]


def test_diff_and_whatif_take_the_map(tmp_path: Path) -> None:
    """--map on diff and whatif as on analyze: the graphed step priced from its eager twin, so a
    diff of the graphed trace against the eager one compares like with like (the same 21,988,180,168
    FLOPs on both sides: no work change), and whatif takes the option and answers from the trace."""
    eager = write(tmp_path, "eager", model_trace(12, graphed=False))
    graphed = write(tmp_path, "graphed", model_trace(12, graphed=True))
    doc = json.loads(tk_out("diff", eager, graphed, "--map", eager, "--format", "json"))
    assert json.dumps(doc).count("21988180168") >= 2
    rc, out, err = tk(
        "whatif", graphed, "--map", eager, "--prefill-ms", "10", "--decode-steps", "50", "--format", "json"
    )
    assert rc == 0, err
    # the step's time is the trace's (the map prices work, not time): its 88 kernels start at
    # 20·88 + 20 = 1,780 µs and run 1,877 µs, so the step ends at 3,657 µs; E2E = 10 + 50 × 3.657 ms
    s = json.loads(out)["sensitivity"]
    assert s["tpot_ms"] == pytest.approx(3.657) and s["e2el_ms"] == pytest.approx(10 + 50 * 3.657)
