"""The what-if: the seed's sensitivity example, the discrete-event simulation on hand-computed cases,
the link table, and the command on a real serve trace."""

from __future__ import annotations

import pytest

from tracekit.errors import UsageError
from tracekit.hardware.links import LINKS, link
from tracekit.whatif import percentile, sensitivity
from tracekit.whatif.sim import Policy, SimRequest, StepCost, metrics, simulate

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


def _cli(*args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "tracekit.cli.main", *args],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "MPLBACKEND": "Agg"},
    )
    return p.returncode, p.stdout, p.stderr


def test_cli_seed_example_from_hand_input() -> None:
    rc, out, err = _cli("whatif", "--prefill-ms", "300", "--tpot-ms", "20", "--decode-steps", "100")
    assert rc == 0, err
    assert "E2E 2,300 ms = prefill 300 ms + decode 2,000 ms" in out
    assert "halving prefill saves 150 ms per request; halving TPOT saves 1,000 ms per request" in out


def test_cli_whatif_on_a_serve_trace() -> None:
    import json

    trace = str(REPO / "sample_traces/serve/serve.pt.trace.json.gz")
    rc, out, err = _cli("whatif", trace, "--link", "pcie4", "--slo", "ttft=500,tpot=50")
    assert rc == 0, err
    for needle in (
        "colocated ",
        "disaggregated ",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "verdict: disaggregation",
        "PCIe 4.0 x16",
        "pcisig.com",
        "KV transfer per request",
        "kv_bytes_per_token: trace shapes: 2 × 2 layers",
    ):
        assert needle in out, needle
    rc, out, err = _cli("whatif", trace, "--format", "json", "--kv-bytes-per-token", "1e9", "--link-gbps", "1")
    doc = json.loads(out)
    # 1 GB per token over 1 GB/s: every transfer takes ≥ 16 s (prompts ≥ 16 tokens) — far more than
    # the interference on this run: the verdict flips to "does not pay".
    assert doc["compare"]["transfer_less_than_interference"] is False
    assert doc["compare"]["disaggregated"]["mean_transfer_ms"] >= 16_000
    assert doc["assumptions"]["kv_bytes_per_token"] == "option --kv-bytes-per-token"


def test_cli_whatif_bad_input_is_one_line() -> None:
    rc, out, err = _cli("whatif")
    assert rc != 0 and "Traceback" not in err and "--prefill-ms" in err
    rc, out, err = _cli("whatif", str(REPO / "sample_traces/serve/serve.pt.trace.json.gz"), "--link", "smoke-signals")
    assert rc != 0 and "Traceback" not in err and "unknown link" in err
    # a trace without request ids: no arrival pattern to replay, said in one line
    llm = str(REPO / "sample_traces/llm/llm.pt.trace.json.gz")
    rc, out, err = _cli("whatif", llm)
    assert rc != 0 and "Traceback" not in err and "no per-request arrivals" in err
