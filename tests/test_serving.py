"""Serving analysis from the trace: request encoding, per-request latency, step period ITL, interference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracekit.analysis.serving.interference import fit, t_quantile
from tracekit.analysis.serving.metrics import encoded_requests, request_tokens, step_period_itl
from tracekit.annotate import format_id_list, format_phase_name, parse_id_list, parse_phase_name, request_attrs

from conftest import SHARED_TRACES

SHARED = SHARED_TRACES / "kineto" / "tracelens" / "inference"  # (TRACEKIT_SHARED_TRACES, as every test)
SMALL = dict(layers=2, d_model=256, heads=4, kv_heads=2, vocab=2048, max_context=256)


def test_id_list_round_trip() -> None:
    assert format_id_list([7, 0, 1, 2, 3, 9, 10, 3]) == "0-3,7,9-10"
    assert parse_id_list("0-3,7,9-10") == [0, 1, 2, 3, 7, 9, 10]
    assert format_id_list([]) == ""
    ids = list(range(0, 600, 2)) + list(range(1000, 1300))
    assert parse_id_list(format_id_list(ids)) == ids
    with pytest.raises(ValueError):
        parse_id_list("5-3")


def test_request_attrs_parse_back_through_the_grammar() -> None:
    attrs = request_attrs([0, 1, 2, 5], [(6, 32, False), (7, 3, True)], [(7, 1500)])
    assert attrs == {"dc": "0-2,5", "pf": "6:32,7:3!", "arr": "7:1500"}
    name = format_phase_name("mixed", step=3, **attrs)
    assert parse_phase_name(name) == {"phase": "mixed", "step": "3", **attrs}


def _steps(rows: list[tuple[str, str, int, int]]) -> pl.DataFrame:
    """(phase, name attrs, cpu_start_ns, done_ns) → a step table as latency.step_table makes it."""
    return pl.DataFrame(
        [
            {"phase": p, "name": f"tk:{p} step={i} {a}", "step": i, "cpu_start_ns": s, "done_ns": d, "step_ns": d - s}
            for i, (p, a, s, d) in enumerate(rows)
        ]
    )


def test_encoded_requests_by_hand() -> None:
    # Request 0 arrives at 0 (waited 1 ms before step 0 started at 1 ms); its prompt is done in step 0
    # (first token at 11 ms), it decodes in steps 1 and 2 (done 15 and 21 ms): TTFT 11, E2E 21,
    # TPOT (21 − 11) / 2 = 5, ITLs 4 and 6.
    # Request 1 arrives at 10 ms (waited 1 ms before step 1 at 11 ms); chunks in steps 1 and 2 (first
    # token at 21 ms): TTFT 11, one token, no TPOT.
    steps = _steps(
        [
            ("prefill", "pf=0:8! arr=0:1000", 1_000_000, 11_000_000),
            ("mixed", "dc=0 pf=1:4 arr=1:1000", 11_000_000, 15_000_000),
            ("mixed", "dc=0 pf=1:2!", 15_000_000, 21_000_000),
        ]
    )
    req, itl, notes = encoded_requests(steps)
    assert notes == []
    r = {row["request"]: row for row in req.to_dicts()}
    assert r[0]["ttft_ms"] == pytest.approx(11.0) and r[0]["e2el_ms"] == pytest.approx(21.0)
    assert r[0]["tpot_ms"] == pytest.approx(5.0) and r[0]["output_tokens"] == 3
    assert r[1]["ttft_ms"] == pytest.approx(11.0) and r[1]["tpot_ms"] is None and r[1]["output_tokens"] == 1
    assert sorted(itl.to_list()) == pytest.approx([4.0, 6.0])
    segs, arr, bad = request_tokens(steps)
    assert bad == 0 and segs.filter(pl.col("request") == 1)["tokens"].sum() == 6


def test_encoded_requests_count_partial_and_malformed() -> None:
    # Request 3 has no arrival in the window (it arrived before the trace): left out and counted.
    steps = _steps([("decode", "dc=3,x-y", 0, 5_000_000), ("decode", "dc=3", 5_000_000, 9_000_000)])
    req, itl, notes = encoded_requests(steps)
    assert req.height == 0 and itl.len() == 0
    assert any("did not parse" in n for n in notes) and any("partly inside" in n for n in notes)


def test_step_period_itl_by_hand() -> None:
    # decode steps done at 10, 14, 20 ms (the first started at 2): ITL 8 (its own duration), 4, 6.
    steps = _steps(
        [
            ("decode", "", 2_000_000, 10_000_000),
            ("decode", "", 10_000_000, 14_000_000),
            ("decode", "", 14_000_000, 20_000_000),
        ]
    )
    assert step_period_itl(steps).to_list() == pytest.approx([8.0, 4.0, 6.0])


def test_t_quantile_against_table() -> None:
    # Student's t, two-sided 95 %: dof 5 → 2.571, 10 → 2.228, 30 → 2.042 (standard tables).
    for dof, t in ((5, 2.571), (10, 2.228), (30, 2.042)):
        assert t_quantile(0.975, dof) == pytest.approx(t, abs=0.01)


def test_interference_fit_by_hand() -> None:
    # One cell (D=4, ctx 100): pure decode 10, 10.2, 9.8 ms; mixed with P=100 → 15, P=200 → 20.2.
    # Within-cell: mean P = 60, mean ms = 13.04; slope = Σxy/Σxx = 0.050875 ms/token:
    # (182.4 + 170.4 + 194.4 + 78.4 + 1002.4) / (3·3600 + 1600 + 19600) = 1628 / 32000.
    dec = pl.DataFrame(
        {
            "D": [4] * 5,
            "P": [0, 0, 0, 100, 200],
            "dctx": [100] * 5,
            "ms": [10.0, 10.2, 9.8, 15.0, 20.2],
            "phase": ["decode"] * 3 + ["mixed"] * 2,
            "step_index": list(range(5)),
        }
    )
    f = fit(dec)
    assert f["cost_ms_per_prefill_token"] == pytest.approx(1628 / 32000)
    assert f["significant"] and f["ci95_low"] < 0.051 < f["ci95_high"] and f["dof"] == 3


def test_decode_only_shared_traces_report_itl() -> None:
    import tracekit
    from tracekit.analysis import analyze

    for rel in ("sglang_decode/sglang_Qwen3-8B_decode.json.gz", "vllm_decode_full/graph_execution.json.gz"):
        res = analyze(tracekit.load(str(SHARED / rel)))
        itl = res.latency.filter(pl.col("metric") == "itl")
        step = res.latency.filter((pl.col("metric") == "step_time") & (pl.col("phase") == "decode"))
        # one decode step: its period is its own duration
        assert itl.height == 1 and itl["count"][0] == 1 and itl["p50"][0] == pytest.approx(step["p50"][0])
        assert itl["p50"][0] > 0


def _serve(tmp: Path, name: str, **kw: Any) -> tuple[Any, dict[str, Any]]:
    from tracekit.workloads.config import ModelConfig, ServeConfig
    from tracekit.workloads.serve import run_serve

    import tracekit
    from tracekit.analysis import analyze

    cfg = ServeConfig(
        model=ModelConfig(**SMALL),
        requests=10,
        prompt_len="uniform:64:160",
        output_len="uniform:6:12",
        arrival="interval:15",
        max_seqs=8,
        threads=1,
        warmup_requests=1,
        **kw,
    ).validate()
    res = run_serve(cfg, tmp / name)
    return analyze(tracekit.load(str(res.trace))), json.loads(res.sidecar.read_text())


@pytest.fixture(scope="module")
def serve_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, dict[str, Any]]]:
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("serving")
    unchunked = _serve(tmp, "unchunked", token_budget=256, chunk=256)
    if not unchunked[0].serving["interference"]["significant"]:
        # A live CPU capture: on a loaded machine (other processes preempting this one mid-step)
        # the step-time noise can drown the mixed-step inflation of 10 requests. Seen twice in
        # full-suite runs beside other jobs, never on a quiet machine; capture once more.
        unchunked = _serve(tmp, "unchunked-again", token_budget=256, chunk=256)
    return {"unchunked": unchunked, "chunked": _serve(tmp, "chunked", token_budget=24, chunk=16)}


@pytest.mark.torch
@pytest.mark.slow
def test_trace_latency_agrees_with_sidecar(serve_runs: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    for res, side in serve_runs.values():
        lat = res.latency
        for metric in ("ttft", "tpot", "e2el"):
            tr = lat.filter((pl.col("metric") == metric) & (pl.col("source") == "trace"))
            sc = lat.filter((pl.col("metric") == metric) & (pl.col("source") == "sidecar"))
            assert tr["count"][0] == sc["count"][0] == len(side["requests"])
            for q in ("p50", "p90"):
                a, b = tr[q][0], sc[q][0]
                assert abs(a - b) <= max(0.05 * b, 0.5), (metric, q, a, b)
        # per request, not only percentiles: the trace's own request ids line up with the runner's
        req = res.requests
        t = req.filter(pl.col("source") == "trace").sort("request")
        s = req.filter(pl.col("source") == "sidecar").sort("request")
        assert (
            t["request"].to_list() == s["request"].to_list()
            and t["output_tokens"].to_list() == s["output_tokens"].to_list()
        )
        # Per request most agree to well under 0.5 ms; a single one may differ by a scheduler time
        # slice (~16 ms seen on the shared 2-core host: the process was preempted between the
        # profiler range's end and the runner's clock read), so the bound is on the median and share.
        diff = (t["ttft_ms"] - s["ttft_ms"]).abs()
        assert diff.median() < 0.5 and (diff < 0.5).mean() >= 0.8, diff.to_list()
        assert res.totals.get("output_tokens") == side["tokens_generated"]
        # prompt tokens rebuilt from the pf= chunks
        prompts = {r["id"]: r["prompt_tokens"] for r in side["requests"]}
        assert {r["request"]: r["prompt_tokens"] for r in res.serving["requests"]} == prompts


@pytest.mark.torch
@pytest.mark.slow
def test_interference_shrinks_with_chunking(serve_runs: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    un = serve_runs["unchunked"][0].serving["interference"]
    ch = serve_runs["chunked"][0].serving["interference"]
    assert un["significant"] and un["cost_ms_per_prefill_token"] > 0 and un["ci95_low"] > 0
    # a step budget of 24 tokens (chunks ≤ 16) vs whole prompts of 64–160: the mixed-step inflation shrinks
    assert ch["mean_prefill_tokens_per_mixed_step"] <= 24 < un["mean_prefill_tokens_per_mixed_step"]
    assert ch.get("mean_mixed_step_inflation_ms", 0.0) < un["mean_mixed_step_inflation_ms"]
    assert 0 < un["tpot_p99_share_explained"] <= 1


def test_mixed_steps_without_request_ids_fall_back_to_sidecar_and_step_period() -> None:
    # Continuous batching without dc=/pf=/arr= (e.g. an old serve trace): no trace TTFT, a warning
    # says why, and ITL is the step period: steps done at 10, 14, 20 ms → 8 (first: its own
    # duration from 2 ms), 4, 6.
    from tracekit.analysis.serving.latency import latency

    units = pl.DataFrame(
        {
            "region_id": [1, 2, 3],
            "name": ["tk:prefill step=0", "tk:mixed step=1", "tk:decode step=2"],
            "phase": ["prefill", "mixed", "decode"],
            "step": [0, 1, 2],
            "cpu_start_ns": [2_000_000, 10_000_000, 14_000_000],
            "cpu_end_ns": [10_000_000, 14_000_000, 20_000_000],
            "last_ns": [None, None, None],
            "decode_seqs": [None, 2, 2],
        },
        schema_overrides={"last_ns": pl.Int64},
    )
    lat = latency(units)
    keys = {(r["metric"], r["source"]) for r in lat.summary.to_dicts()}
    assert ("ttft", "trace") not in keys
    assert any(n.startswith("continuous batching") for n in lat.scalars["notes"])
    itl = lat.summary.filter(pl.col("metric") == "itl").row(0, named=True)
    # mixed step [10, 14] → 14 − 10 = 4; decode step → 20 − 14 = 6
    assert itl["count"] == 2 and itl["min"] == pytest.approx(4.0) and itl["max"] == pytest.approx(6.0)
    assert lat.scalars["itl_source"] == "decode step period"


def test_vllm_names_give_decode_context_and_composition() -> None:
    # generation part: 4 decode requests reading 400 KV entries → decode context 100 per sequence;
    # a pure decode step (no generation sk in the tk name) falls back to ctx.
    from tracekit.analysis.serving.interference import decoding_steps
    from tracekit.analysis.serving.metrics import composition

    steps = pl.DataFrame(
        {
            "name": [
                "execute_64_context_1(sq60sk60sqsq3600sqsk3600)_generation_4(sq4sk400sqsq4sqsk400)",
                "execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk404sqsq4sqsk404)",
            ],
            "phase": ["mixed", "decode"],
            "decode_seqs": [4, 4],
            "prefill_tokens": [60, 0],
            "ctx": [25, 101],
            "batch": [5, 4],
            "step_ns": [9_000_000, 3_000_000],
            "cpu_start_ns": [0, 9_000_000],
            "done_ns": [9_000_000, 12_000_000],
        }
    )
    dec = decoding_steps(steps)
    assert dec["dctx"].to_list() == [100, 101] and dec["P"].to_list() == [60, 0] and dec["D"].to_list() == [4, 4]
    comp = composition(steps)
    assert comp["phase"].to_list() == ["mixed", "decode"] and comp["steps"].sum() == 2
    assert comp.filter(pl.col("phase") == "mixed")["mean_ms"][0] == pytest.approx(9.0)


def test_shared_sglang_decode_trace_composition_and_no_interference_estimate() -> None:
    import tracekit
    from tracekit.analysis import analyze

    res = analyze(tracekit.load(str(SHARED / "sglang_decode/sglang_Qwen3-8B_decode.json.gz")))
    comp = res.serving["composition"]
    # one DECODE step of 32 sequences (execute_32_context_0(…)_generation_32(…))
    assert len(comp) == 1 and comp[0]["phase"] == "decode" and comp[0]["decode_seqs"] == 32 and comp[0]["steps"] == 1
    inf = res.serving["interference"]
    assert inf["cost_ms_per_prefill_token"] is None and "matched" in inf["why_none"]
