"""The what-if: the seed's sensitivity example, the discrete-event simulation on hand-computed cases,
the link table, and the command on a real serve trace."""

from __future__ import annotations

import pathlib

import pytest

from tracekit.errors import UsageError
from tracekit.hardware.links import LINKS, link
from tracekit.whatif import percentile, sensitivity
from tracekit.whatif.sim import Policy, SimRequest, StepCost, metrics, simulate
from cli_run import tk

# step = 10 ms + 0.1 ms per prefill token + 1 ms per decoding sequence (no context term)
COST = StepCost(c0=10.0, cp=0.1, cd=1.0, ck=0.0)
POL = Policy(token_budget=256, max_seqs=8, chunk=256)
# KV: 1,000 B per token over a 1 MB/s link → 1 ms per prompt token
KV, BW = 1000.0, 1e6


def test_seed_example_exactly() -> None:
    # 2,000-token prompt, 100 output tokens: 300 ms prefill + 100 × 20 ms decode = 2,300 ms;
    # halving prefill saves 150 ms, halving TPOT saves 1,000 ms.
    s = sensitivity([300.0], [100], [20.0])
    assert s["e2el_ms"] == 2300.0 and s["save_half_prefill_ms"] == 150.0 and s["save_half_tpot_ms"] == 1000.0


def test_sensitivity_over_a_length_distribution() -> None:
    # two requests: (100 ms, 10 × 5 ms) and (300 ms, 30 × 10 ms): E2E 150 and 600 → mean 375;
    # halving prefill saves (50 + 150) / 2 = 100; halving TPOT saves (25 + 150) / 2 = 87.5.
    s = sensitivity([100.0, 300.0], [10, 30], [5.0, 10.0])
    assert (s["e2el_ms"], s["save_half_prefill_ms"], s["save_half_tpot_ms"]) == (375.0, 100.0, 87.5)
    with pytest.raises(UsageError):
        sensitivity([1.0], [1, 2], [1.0])


def _by_id(rows: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {r["request"]: r for r in rows}


def test_one_request_colocated_and_disaggregated() -> None:
    # prompt 100, 3 output tokens, arrives at 0.
    # Colocated: prefill step 10 + 0.1·100 = 20 ms → first token at 20; two decode steps of
    # 10 + 1 = 11 ms → 31, 42. TTFT 20, TPOT (42 − 20) / 2 = 11, E2E 42, no interference.
    r = [SimRequest(0, 0.0, 100, 3)]
    co = metrics(simulate(r, COST, POL, 1))[0]
    assert (co["ttft_ms"], co["tpot_ms"], co["e2el_ms"], co["interference_ms"]) == (20.0, 11.0, 42.0, 0.0)
    # Disaggregated: first token at 20 from the prefill worker; KV 100 × 1,000 B at 1 MB/s = 100 ms
    # → on the decode worker at 120; decode steps end 131, 142. TPOT (142 − 20) / 2 = 61.
    dis = metrics(simulate(r, COST, POL, 1, 1, KV, BW))[0]
    assert (dis["ttft_ms"], dis["tpot_ms"], dis["e2el_ms"], dis["transfer_ms"]) == (20.0, 61.0, 142.0, 100.0)


def test_two_overlapping_requests() -> None:
    # A: arrives 0, prompt 100, 3 tokens. B: arrives 5, prompt 50, 2 tokens.
    a, b = SimRequest(0, 0.0, 100, 3), SimRequest(1, 5.0, 50, 2)
    # Colocated, one worker: step 1 [0, 20): A's prompt (B not yet arrived). Step 2 [20, 36): A
    # decodes + B's prompt: 10 + 5 + 1 = 16 → A token 2, B first token at 36 (TTFT 31).
    # Step 3 [36, 48): both decode, 10 + 2 = 12 → A done (3 tokens), B done (2 tokens).
    # A: TTFT 20, TPOT (48 − 20)/2 = 14, E2E 48, interference 0.1·50 = 5 ms (step 2).
    # B: TTFT 31, TPOT (48 − 36)/1 = 12, E2E 43, interference 0.
    co = _by_id(metrics(simulate([a, b], COST, POL, 1)))
    assert (co[0]["ttft_ms"], co[0]["tpot_ms"], co[0]["e2el_ms"], co[0]["interference_ms"]) == (20.0, 14.0, 48.0, 5.0)
    assert (co[1]["ttft_ms"], co[1]["tpot_ms"], co[1]["e2el_ms"], co[1]["interference_ms"]) == (31.0, 12.0, 43.0, 0.0)
    # Disaggregated 1 + 1: prefill worker: A [0, 20), B [20, 35) (10 + 5) → B TTFT 30.
    # Link: A's KV 20 → 120; B's waits for the link: 120 → 170 (transfer incl. wait 135).
    # Decode worker: A [120, 131), [131, 142) → done; B [170, 181) → done.
    # A: TPOT (142 − 20)/2 = 61, E2E 142. B: TPOT (181 − 35)/1 = 146, E2E 176.
    dis = _by_id(metrics(simulate([a, b], COST, POL, 1, 1, KV, BW)))
    assert (dis[0]["ttft_ms"], dis[0]["tpot_ms"], dis[0]["e2el_ms"], dis[0]["transfer_ms"]) == (
        20.0,
        61.0,
        142.0,
        100.0,
    )
    assert (dis[1]["ttft_ms"], dis[1]["tpot_ms"], dis[1]["e2el_ms"], dis[1]["transfer_ms"]) == (
        30.0,
        146.0,
        176.0,
        135.0,
    )


def test_chunk_and_budget_respected() -> None:
    # prompt 100 with chunk 40: steps of 40, 40, 20 tokens: 14 + 14 + 12 = 40 ms → TTFT 40.
    co = metrics(simulate([SimRequest(0, 0.0, 100, 1)], COST, Policy(256, 8, 40), 1))[0]
    assert co["ttft_ms"] == 40.0 and co["tpot_ms"] is None and co["e2el_ms"] == 40.0


def test_percentile_matches_numpy_linear() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5 and percentile([10.0], 0.99) == 10.0
    assert percentile([0.0, 10.0], 0.9) == 9.0 and percentile([], 0.5) is None


def test_link_table_has_sources() -> None:
    assert {"nvlink4", "pcie5", "ib-ndr"} <= set(LINKS)
    for entry in LINKS.values():
        assert entry["gbps"] > 0 and "(" in entry["source"]
    # PCIe 4.0 x16: 16 GT/s × 16 lanes × 128/130 / 8 bits = 31.5 GB/s
    assert link("PCIe4")["gbps"] == pytest.approx(16 * 16 * 128 / 130 / 8, abs=0.05)
    with pytest.raises(UsageError):
        link("carrier-pigeon")


REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_cli_seed_example_from_hand_input() -> None:
    rc, out, err = tk("whatif", "--prefill-ms", "300", "--tpot-ms", "20", "--decode-steps", "100")
    assert rc == 0, err
    assert "E2E 2,300 ms = prefill 300 ms + decode 2,000 ms" in out
    assert "halving prefill saves 150 ms per request; halving TPOT saves 1,000 ms per request" in out


# A constructed `run serve` trace (tests/kineto_events.serve_trace): token budget 256, max seqs 8,
# chunk 128; steps cost exactly 10 ms + 0.1 ms per prefill token + 1 ms per decoding sequence, back
# to back (no gap). A arrives at 0 (prompt 100, 4 tokens), B at 5 ms (prompt 50, 2 tokens):
#   [0, 20)  prefill A:100!             10 + 10      → A's first token at 20
#   [20, 36) mixed dc=A, pf B:50!        10 + 5 + 1   → B waited 15 ms; B's first token at 36
#   [36, 48) decode A, B                 10 + 2       → B done
#   [48, 59) decode A                    10 + 1       → A done
# A: TTFT 20, TPOT (59 − 20) / 3 = 13, E2E 59.  B: TTFT 31, TPOT 12, E2E 43.
SERVE_STEPS = [
    ("prefill", 0, 20, dict(prefill_tokens=100, decode_seqs=0, tokens=100, seqs=1, budget=256, pf="0:100!", arr="0:0")),
    (
        "mixed",
        20,
        36,
        dict(prefill_tokens=50, decode_seqs=1, tokens=51, seqs=2, budget=256, dc="0", pf="1:50!", arr="1:15000"),
    ),
    ("decode", 36, 48, dict(prefill_tokens=0, decode_seqs=2, tokens=2, seqs=2, budget=256, dc="0-1")),
    ("decode", 48, 59, dict(prefill_tokens=0, decode_seqs=1, tokens=1, seqs=1, budget=256, dc="0")),
]


def _serve(tmp_path: object) -> str:
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from kineto_events import serve_trace

    return str(serve_trace(tmp_path, SERVE_STEPS))


def test_cli_whatif_on_a_serve_trace(tmp_path: object) -> None:
    import json

    trace = _serve(tmp_path)
    rc, out, err = tk("whatif", trace, "--link", "pcie4", "--slo", "ttft=500,tpot=50", "--kv-bytes-per-token", "1000")
    assert rc == 0, err
    for needle in (
        "colocated ",
        "disaggregated ",
        "TTFT p50",
        "TPOT p99",
        "verdict (from the table above): disaggregation",
        "PCIe 4.0 x16",
        "pcisig.com",
        "KV transfer per request",
        "R² 1.000",
        "residual p10 / p50 / p90 0 / 0 / 0 ms",
    ):
        assert needle in out, needle
    # Sensitivity per traced request, prefill costed as the runner's chunks (both prompts ≤ 128:
    # one chunk each): A 10 + 10 = 20, B 10 + 5 = 15 ms; decode A 3 × 13 = 39, B 1 × 12 = 12 ms.
    # E2E mean (59 + 27) / 2 = 43; halving prefill saves (20 + 15) / 4 = 8.75; TPOT (39 + 12) / 4 = 12.75.
    rc, out, err = tk("whatif", trace, "--format", "json", "--kv-bytes-per-token", "1e9", "--link-gbps", "1")
    doc = json.loads(out)
    s = doc["sensitivity"]
    assert (s["e2el_ms"], s["save_half_prefill_ms"], s["save_half_tpot_ms"]) == pytest.approx((43.0, 8.75, 12.75))
    sc_text = doc["assumptions"]["step_cost"]
    assert "non-negative least squares over 4 traced steps" in sc_text
    # 1 GB per token over 1 GB/s: every transfer takes ≥ 50 s — far more than the interference.
    assert doc["compare"]["transfer_less_than_interference"] is False
    assert doc["compare"]["disaggregated"]["mean_transfer_ms"] >= 50_000
    assert doc["assumptions"]["kv_bytes_per_token"] == "option --kv-bytes-per-token"
    assert doc["compare"]["outcome"] == "does not pay"


def test_conclusion_follows_the_table(tmp_path: object) -> None:
    """Whatever the mechanism line says, the verdict is read off the simulated figures."""
    import json

    trace = _serve(tmp_path)
    for kv in ("1", "1000", "1e6", "1e9"):
        rc, out, err = tk("whatif", trace, "--format", "json", "--kv-bytes-per-token", kv, "--link-gbps", "1")
        assert rc == 0, err
        c = json.loads(out)["compare"]
        co, dis = c["colocated"], c["disaggregated"]
        table = {
            f"{lab} {q}": (dis[k][q], co[k][q])
            for k, lab in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2el_ms", "E2E"))
            for q in ("p50", "p99")
        }
        for name, a, b in c["better"]:
            assert table[name] == (a, b) and a < b
        for name, a, b in c["worse"]:
            assert table[name] == (a, b) and a > b
        worse = any(a > b * 1.01 for a, b in table.values())
        better = any(a < b * 0.99 for a, b in table.values())
        want = {(True, False): "pays", (False, True): "does not pay", (True, True): "trade-off"}.get(
            (better, worse), "no difference"
        )
        assert c["outcome"] == want, (kv, c["verdict"])


def test_verdict_of_the_issue_numbers() -> None:
    from tracekit.whatif.verdict import verdict

    # issue 27: the mechanism said "pays" while the table showed TTFT p50 43.6 vs 28.1 ms.
    def side(ttft: float, tpot: float, e2e: float) -> dict[str, object]:
        return {
            "ttft_ms": {"p50": ttft, "p99": ttft * 2},
            "tpot_ms": {"p50": tpot, "p99": tpot * 2},
            "e2el_ms": {"p50": e2e, "p99": e2e * 2},
        }

    v = verdict(side(28.1, 10.0, 300.0), side(43.6, 9.0, 320.0))
    assert v["outcome"] == "trade-off"
    assert [n for n, *_ in v["better"]] == ["TPOT p50", "TPOT p99"]
    assert [n for n, *_ in v["worse"]] == ["TTFT p50", "TTFT p99", "E2E p50", "E2E p99"]
    assert "worse TTFT p50 43.6 vs 28.1 ms" in v["text"]
    assert verdict(side(28.1, 10.0, 300.0), side(40.0, 11.0, 330.0))["outcome"] == "does not pay"
    assert verdict(side(28.1, 10.0, 300.0), side(28.2, 10.0, 300.0))["outcome"] == "no difference"  # < 1 %
    # with an SLO, goodput decides
    g = verdict(side(1, 1, 1) | {"goodput_req_per_s": 2.0}, side(9, 9, 9) | {"goodput_req_per_s": 3.0})
    assert g["outcome"] == "pays" and g["text"].endswith("under the SLO")


def test_arrival_replays_the_traced_requests(tmp_path: object) -> None:
    import json

    trace = _serve(tmp_path)
    # burst: both at 0, admitted together: step [0, 25) prefills 100 + 50 (10 + 15) → both first
    # tokens at 25; [25, 37) decodes both (B done), [37, 48), [48, 59) decode A.
    # A: TTFT 25, TPOT (59 − 25) / 3 = 11.33, E2E 59; B: TTFT 25, TPOT 12, E2E 37.
    rc, out, err = tk("whatif", trace, "--arrival", "burst", "--format", "json")
    assert rc == 0, err
    ld = json.loads(out)["load"]
    p = ld["predicted"]
    assert p["ttft_ms"]["p50"] == pytest.approx(25.0)
    assert p["tpot_ms"]["p50"] == pytest.approx((34 / 3 + 12) / 2)
    assert p["e2el_ms"]["p50"] == pytest.approx(48.0)
    # the traced arrivals replayed reproduce the measured requests exactly: error 0
    assert all(abs(v) < 1e-9 for v in ld["error_at_traced_load"].values())
    assert ld["measured_traced"]["ttft_ms"]["p50"] == pytest.approx((20 + 31) / 2)
    # interval:1000: each request alone: A TTFT 20, 3 decode steps of 11 → TPOT 11, E2E 53;
    # B TTFT 15, TPOT 11, E2E 26.
    rc, out, err = tk("whatif", trace, "--arrival", "interval:1000", "--format", "json")
    p = json.loads(out)["load"]["predicted"]
    assert (p["ttft_ms"]["p50"], p["tpot_ms"]["p50"], p["e2el_ms"]["p50"]) == pytest.approx((17.5, 11.0, 39.5))
    rc, out, err = tk("whatif", trace, "--arrival", "poisson:50")
    assert rc == 0, err
    assert "predicted at poisson:50" in out and "seed 0" in out  # no traced poisson schedule: drawn


def test_arrival_rescales_a_traced_poisson_schedule() -> None:
    from tracekit.whatif.load import Arrival, arrival_times

    # traced at poisson:20 with arrivals 0, 30, 100 ms → at poisson:60 the same draws × 20 / 60
    reqs = [SimRequest(i, a, 10, 2) for i, a in enumerate([0.0, 30.0, 100.0])]
    t, src = arrival_times(Arrival.parse("poisson:60"), reqs, "poisson:20", 0)
    assert t == pytest.approx([0.0, 10.0, 100 / 3]) and "× 20 / 60" in src


def test_arrival_values_are_checked_by_the_cli(tmp_path: object) -> None:
    trace = _serve(tmp_path)
    for bad in ("poisson:0", "poisson:nan", "poisson:inf", "interval:-1", "uniform:3", "burst:2"):
        rc, out, err = tk("whatif", trace, "--arrival", bad)
        assert rc == 2 and "Traceback" not in err and "--arrival" in err, (bad, err)


def test_nnls_keeps_coefficients_non_negative() -> None:
    import polars as pl

    from tracekit.analysis.serving.step_cost import fit_step_cost

    # Unconstrained: 11 + 0.1·P − 1·D fits exactly (a step getting faster with more sequences).
    # Constrained (cd ≥ 0): cd = 0 and c0 + cp·P by least squares: P = 0 → mean(10, 9) = 9.5,
    # P = 100 → mean(20, 19) = 19.5 → c0 9.5, cp 0.1; residuals ±0.5; TSS 101 → R² = 1 − 1/101.
    steps = pl.DataFrame({"P": [0, 100, 0, 100], "D": [1, 1, 2, 2], "dctx": [0] * 4, "ms": [10.0, 20.0, 9.0, 19.0]})
    f = fit_step_cost(steps)
    assert f["per_decode_seq_ms"] == 0.0
    assert (f["intercept_ms"], f["per_prefill_token_ms"]) == pytest.approx((9.5, 0.1))
    assert f["r2"] == pytest.approx(1 - 1 / 101) and f["refused"] is None
    assert f["residual_ms"]["p90"] == pytest.approx(0.5)


def test_host_noise_outliers_are_left_out_and_counted() -> None:
    import polars as pl

    from tracekit.analysis.serving.step_cost import fit_step_cost

    # 11 steps of exactly 10 + 0.1·P ms; one of them (P = 50) preempted for 500 ms more. It lies
    # far beyond 5 robust deviations: left out (1 ≤ 10 % of 11), the fit is exact on the other 10.
    p = [0, 100, 0, 100, 50, 50, 0, 100, 20, 80, 40]
    ms = [10 + 0.1 * v for v in p]
    ms[5] += 500
    f = fit_step_cost(pl.DataFrame({"P": p, "D": [1] * 11, "dctx": [0] * 11, "ms": ms}))
    assert (f["intercept_ms"], f["per_prefill_token_ms"]) == pytest.approx((10.0, 0.1))
    assert f["outliers"] == 1 and f["outlier_excess_ms"] == pytest.approx(500.0) and f["r2"] == pytest.approx(1.0)
    # share of all step time: 500 / (Σ(10 + 0.1·P) + 500) = 500 / (110 + 54 + 500)
    assert f["noise_share"] == pytest.approx(500 / (110 + 54 + 500))
    # two such steps of 11 would be more than 10 %: kept, and the fit is then poor
    ms[2] += 500
    g = fit_step_cost(pl.DataFrame({"P": p, "D": [1] * 11, "dctx": [0] * 11, "ms": ms}))
    assert g["outliers"] == 0 and g["refused"] is not None


def test_a_poor_fit_is_refused() -> None:
    import polars as pl

    from tracekit.analysis.serving.step_cost import fit_step_cost

    # P explains nothing: P = 0 → 10, 30; P = 100 → 10, 30: cp = 0, c0 = 20, R² = 0 < 0.5.
    steps = pl.DataFrame({"P": [0, 100, 0, 100], "D": [1] * 4, "dctx": [0] * 4, "ms": [10.0, 10.0, 30.0, 30.0]})
    f = fit_step_cost(steps)
    assert f["r2"] == pytest.approx(0.0) and f["refused"].startswith("R² 0.00 < 0.5")


def test_chunked_prefill_is_costed_as_chunks() -> None:
    from tracekit.whatif.sensitivity import chunked_prefill_ms

    # 300 tokens in chunks of 128: 128 + 128 + 44 → (10 + 12.8) × 2 + (10 + 4.4) = 60 ms
    assert chunked_prefill_ms(300, StepCost(10.0, 0.1), Policy(256, 8, 128)) == pytest.approx(60.0)
    # the token budget caps a chunk too: budget 100 → 100 + 100 + 100 → 3 × 20 = 60... + intercepts
    assert chunked_prefill_ms(300, StepCost(10.0, 0.1), Policy(100, 8, 128)) == pytest.approx(60.0)


def test_cli_whatif_bad_input_is_one_line() -> None:
    rc, out, err = tk("whatif")
    assert rc != 0 and "Traceback" not in err and "--prefill-ms" in err
    rc, out, err = tk("whatif", str(REPO / "sample_traces/serve/serve.pt.trace.json.gz"), "--link", "smoke-signals")
    assert rc != 0 and "Traceback" not in err and "unknown link" in err


def test_a_trace_without_request_ids_gets_the_measured_sensitivity() -> None:
    # the static-batch llm sample: prefill, decode steps, one request batch; no arrivals to replay
    llm = str(REPO / "sample_traces/llm/llm.pt.trace.json.gz")
    rc, out, err = tk("whatif", llm)
    assert rc == 0, err
    assert "Replay: not run; it lacks per-request arrivals" in out
    assert "from measured step times" in out and "halving prefill saves" in out
    rc, out, err = tk("whatif", llm, "--arrival", "poisson:10")
    assert rc == 5 and "Traceback" not in err and "lacks per-request arrivals" in err


def test_the_noisy_sample_serve_trace_is_simulated_with_its_noise() -> None:
    # sample_traces/serve: decode steps of one composition take 6.1, 15.1 and 20.3 ms (a busy
    # machine). R² 0.77 ≥ 0.5: the composition predicts; the spread is the host's noise, which the
    # replays draw from (20 seeded replays), so the prediction comes with an interval.
    import json

    trace = str(REPO / "sample_traces/serve/serve.pt.trace.json.gz")
    rc, out, err = tk("whatif", trace, "--arrival", "poisson:60", "--format", "json")
    assert rc == 0, err
    ld = json.loads(out)["load"]
    assert ld["predicted"]["replicates"] == 20 and ld["replay_of_traced"]["replicates"] == 20
    # at the traced load the measured p50s lie inside the replays' 10–90 % interval
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        lo, hi = ld["replay_of_traced"]["interval"][key]["p50"]
        assert lo <= ld["measured_traced"][key]["p50"] <= hi, (key, lo, hi)
    rc, out, _ = tk("whatif", trace, "--arrival", "poisson:60")
    assert rc == 0 and "interval (10–90 %)" in out and "median of 20 replays" in out


def test_a_noisy_step_cost_draws_its_ratios() -> None:
    import polars as pl

    from tracekit.analysis.serving.step_cost import fit_step_cost

    # one request of a 1-token prompt and 2 output tokens: 2 steps of 10 ms × a ratio drawn from
    # (1, 3) each: E2E is 20, 40 or 60 ms, and seeds 0..19 give more than one of them
    cost = StepCost(10.0, 0.0, noise=(1.0, 3.0))
    got = {
        metrics(simulate([SimRequest(0, 0.0, 1, 2)], cost, Policy(), 1, seed=seed))[0]["e2el_ms"] for seed in range(20)
    }
    assert got <= {20.0, 40.0, 60.0} and len(got) > 1
    # without a seed (or without noise) every step is the fit's: 20 ms
    assert metrics(simulate([SimRequest(0, 0.0, 1, 2)], cost, Policy(), 1))[0]["e2el_ms"] == 20.0
    # the fit's ratios: steps of 10 + 0.1·P ms, every other one 1.5× slower (P alternating 0, 100):
    # the fit lies between; the 20 quantiles of measured / fitted rise, and the fastest is < 1
    p = [0, 100] * 10
    ms = [(10 + 0.1 * v) * (1.5 if i % 4 < 2 else 1.0) for i, v in enumerate(p)]
    f = fit_step_cost(pl.DataFrame({"P": p, "D": [1] * 20, "dctx": [0] * 20, "ms": ms}))
    r = f["noise_ratios"]
    assert len(r) == 20 and r == sorted(r) and r[0] < 1 < r[-1] and f["refused"] is None


def test_sensitivity_from_real_traces(shared_traces: pathlib.Path) -> None:
    SGLANG = shared_traces / "kineto/tracelens/inference"
    # the SGLang decode trace: 1 decode step of 32 sequences → its measured step time is the TPOT;
    # the prefill and the number of decode steps come from options. E2E = 987 + 100 × TPOT.
    import json

    dec = str(SGLANG / "sglang_decode/sglang_Qwen3-8B_decode.json.gz")
    rc, out, err = tk("whatif", dec, "--prefill-ms", "987", "--decode-steps", "100", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    s = doc["sensitivity"]
    tpot = s["tpot_ms"]
    assert "p50 of 1 decode step measured in the trace" in doc["assumptions"]["sensitivity tpot"]
    assert s["e2el_ms"] == pytest.approx(987 + 100 * tpot) and s["save_half_tpot_ms"] == pytest.approx(50 * tpot)
    assert "a step-cost fit: 1 step with a known composition: need ≥ 2" in doc["replay"]["lacks"][0]
    # without options: one line naming every missing input and the option that supplies it
    rc, out, err = tk("whatif", dec)
    assert rc == 5 and "Traceback" not in err
    assert "give --prefill-ms" in err and "give --decode-steps" in err and "need ≥ 2" in err
    pre = str(SGLANG / "sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz")
    rc, out, err = tk("whatif", pre, "--tpot-ms", "20", "--decode-steps", "100", "--format", "json")
    assert rc == 0, err
    s = json.loads(out)["sensitivity"]
    prefill = s["prefill_ms"]
    assert s["save_half_tpot_ms"] == pytest.approx(1000.0) and prefill > 100
    # the prefill trace and the decode trace of one model together: each input from the trace that
    # has it (prefill 1 step, decode 1 step), decode steps by hand; E2E = prefill + 100 × TPOT
    rc, out, err = tk("whatif", pre, dec, "--decode-steps", "100", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    s = doc["sensitivity"]
    assert (s["prefill_ms"], s["tpot_ms"]) == pytest.approx((prefill, tpot))
    assert s["e2el_ms"] == pytest.approx(prefill + 100 * tpot)
    # the decode trace's one step is 98 % a blocking copy: the source says so (issue 40)
    tsrc = doc["assumptions"]["sensitivity tpot"]
    assert f"({dec}) (one token per sequence per step) — WARNING: 98 % of the decode steps' time" in tsrc
    assert doc["replay"]["lacks"] == ["one traced run (2 traces given: the replay reads one)"]
    rc, out, err = tk("whatif", pre, dec, "--decode-steps", "100", "--arrival", "burst")
    assert rc == 5 and "the replay reads one" in err


def test_whatif_takes_the_analysis_options(tmp_path: object) -> None:
    # --phase-map turns the two decode steps into "other": the fit sees the other 2 steps only;
    # --hardware is accepted like analyze's
    trace = _serve(tmp_path)
    rc, out, err = tk("whatif", trace, "--hardware", "h100", "--kv-bytes-per-token", "1000")
    assert rc == 0, err
    assert "over 4 traced steps" in out
    rc, out, err = tk("whatif", trace, "--phase-map", "^tk:decode=other", "--prefill-ms", "1")
    assert rc == 0 and "over 2 traced steps" in out, err
    rc, out, err = tk("whatif", trace, "--phase-map", "nonsense")
    assert rc != 0 and "Traceback" not in err


def test_a_tpot_from_a_step_that_is_one_blocking_copy_is_flagged(shared_traces: pathlib.Path) -> None:
    # the SGLang decode trace's one decode step spans 473.8 ms, 463.0 ms of it a blocking
    # hipMemcpyWithStream (463,034,952 / 473,830,532 ns = 98 %): its "TPOT" is that wait (issue 40)
    base = shared_traces / "kineto/tracelens/inference"
    pre = base / "sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
    dec = base / "sglang_decode/sglang_Qwen3-8B_decode.json.gz"
    rc, out, err = tk("whatif", pre, dec)
    assert rc == 0, err
    assert "WARNING: 98 % of the decode steps' time is a blocking host call" in out
    assert "blocking hipMemcpyWithStream" in out and "give --tpot-ms" in out


def test_a_replay_runs_at_one_drift_level_of_the_traced_run() -> None:
    """Issue 40 item 7: the host's slow drift. 20 steps in time order whose measured / fitted ratio is
    1.0 for the first 10 and 1.5 after: cut into 5 runs of 4 consecutive steps, the runs' medians are
    1, 1, median(1, 1, 1.5, 1.5) = 1.25, 1.5, 1.5, and each step's own noise is its ratio over its
    run's (1.0 everywhere but the mixed run: 0.8, 0.8, 1.2, 1.2). Shuffling the time order changes
    the runs, not the ratios."""
    import numpy as np

    from tracekit.analysis.serving.step_cost import drift
    from tracekit.whatif.sim import Policy, SimRequest, StepCost, metrics, simulate

    ratio = np.array([1.0] * 10 + [1.5] * 10)
    blocks, within = drift(ratio, np.arange(20))
    assert blocks == [1.0, 1.0, 1.25, 1.5, 1.5]
    assert sorted(np.round(within, 4).tolist()) == [0.8, 0.8] + [1.0] * 16 + [1.2, 1.2]
    # no time order, or fewer than 5 × 4 steps: no drift, the ratios as they are
    assert drift(ratio, None)[0] == [] and drift(ratio[:19], np.arange(19))[0] == []
    # a replay draws one level for all its steps: 2 steps of 10 ms at drift 1 or 2 → E2E 20 or 40 ms,
    # never 30 (which a per-step draw would give a quarter of the time)
    cost = StepCost(10.0, 0.0, noise=(1.0,), drift=(1.0, 2.0))
    got = {
        metrics(simulate([SimRequest(0, 0.0, 1, 2)], cost, Policy(), 1, seed=seed))[0]["e2el_ms"] for seed in range(20)
    }
    assert got == {20.0, 40.0}


def test_a_prediction_beyond_the_traced_batches_says_so() -> None:
    """A replay whose steps decode 4 sequences when the fit saw at most 3: 49 of 175 steps (by hand
    from the counts below) are beyond it, and the words say how far."""
    from tracekit.whatif.run import beyond_fit

    run = {"steps": 175, "max_prefill_tokens": 32, "max_decode_seqs": 4, "decode_seqs": {"0": 6, "3": 120, "4": 49}}
    ranges = {"P": [0, 32], "D": [0, 3], "dctx": [0, 290]}
    words = beyond_fit(run, ranges)
    assert (
        words is not None
        and "49 of its 175 steps decode more sequences than any traced step (up to 4, traced ≤ 3)" in words
    )
    assert beyond_fit(run, {"P": [0, 32], "D": [0, 4]}) is None
    assert "prefill chunks up to 32 tokens (traced ≤ 16)" in (beyond_fit(run, {"P": [0, 16], "D": [0, 4]}) or "")


def test_the_comparison_says_how_often_its_outcome_holds_under_noise() -> None:
    """The colocated-vs-disaggregated verdict with the traced steps' noise: the same 20 seeded
    replays as the --arrival interval; with noise (1, 1) every replay is the noise-free one, so the
    outcome holds in 20 of 20; without noise the count is absent (one exact replay)."""
    from tracekit.whatif import Inputs, compare
    from tracekit.whatif.sim import Policy, SimRequest, StepCost

    reqs = [SimRequest(i, 5.0 * i, 64, 8) for i in range(6)]
    base = dict(requests=reqs, policy=Policy(), kv_bytes_per_token=1000.0, sources={}, schedule=None, seed=0)
    quiet = compare(Inputs(cost=StepCost(2.0, 0.05, 0.5), **base), 1, 1, 1e9)  # type: ignore[arg-type]
    assert quiet["outcome_in_noisy_replays"] is None
    flat = compare(Inputs(cost=StepCost(2.0, 0.05, 0.5, noise=(1.0, 1.0)), **base), 1, 1, 1e9)  # type: ignore[arg-type]
    assert flat["outcome_in_noisy_replays"] == {"same": 20, "of": 20} and flat["outcome"] == quiet["outcome"]
