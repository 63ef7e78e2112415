"""Interference with its uncertainty (issue 27 item 7): the prefill–decode interference estimate is
"no reliable estimate" (with the reason) when its 95 % CI includes 0 or the pure-decode steps'
spread says the machine was noisy, on every screen that shows it. Numbers derived in the comments."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.analysis.serving.interference import fit
from tracekit.report.sections.serving import interference_sentence


def _dec(pure: list[float], mixed: list[tuple[int, float]]) -> pl.DataFrame:
    """One cell (D = 4, context 100): pure-decode steps of ``pure`` ms, mixed steps (P, ms)."""
    n = len(pure) + len(mixed)
    return pl.DataFrame(
        {
            "D": [4] * n,
            "P": [0] * len(pure) + [p for p, _ in mixed],
            "dctx": [100] * n,
            "ms": pure + [m for _, m in mixed],
            "phase": ["decode"] * len(pure) + ["mixed"] * len(mixed),
            "step_index": list(range(n)),
        }
    )


def _sentence(f: dict[str, object]) -> str:
    text = interference_sentence({"interference": f})
    assert text is not None
    return text


def test_a_clean_significant_fit_is_reliable() -> None:
    # test_serving's by-hand cell: b = 1628 / 32000 ms per token, CI above 0; pure steps 9.8, 10, 10.2
    # → p90 / p10 (linear: 10.16 / 9.84) = 1.0325 ≤ 2 → reliable, and the sentence gives the number.
    f = fit(_dec([10.0, 10.2, 9.8], [(100, 15.0), (200, 20.2)]))
    assert f["significant"] and f["reliable"] and f["why_unreliable"] is None
    assert f["pure_decode_spread"] == pytest.approx(10.16 / 9.84)
    assert _sentence(f).startswith("prefill–decode interference: each co-scheduled prefill token adds 50.9 µs")


def test_a_ci_including_zero_is_no_reliable_estimate() -> None:
    # mixed steps no slower than pure ones: x = P − 60 = (−60, −60, −60, 40, 140), y = ms − 10 =
    # (0, 0.2, −0.2, 0.1, −0.1): Σxy = −12 + 12 + 4 − 14 = −10, Σxx = 32000 → b = −0.0003125 ms/token;
    # the CI spans 0 → not significant → no reliable estimate.
    f = fit(_dec([10.0, 10.2, 9.8], [(100, 10.1), (200, 9.9)]))
    assert f["cost_ms_per_prefill_token"] == pytest.approx(-10 / 32000)
    assert not f["significant"] and not f["reliable"] and f["ci95_low"] < 0 < f["ci95_high"]
    assert f["why_unreliable"].startswith("its 95 % CI (") and f["why_unreliable"].endswith(
        " µs per prefill token) includes 0"
    )
    text = _sentence(f)
    assert text.startswith("prefill–decode interference: no reliable estimate — its 95 % CI (")
    assert "adds" not in text and "explains" not in text  # no figure printed as a result


def test_a_noisy_machine_is_no_reliable_estimate() -> None:
    # pure-decode steps 9.9, 10, 10.1, 21.8, 22, 22.1 ms (half of them preempted): p90 / p10 (linear,
    # positions 4.5 and 0.5 of 6) = 22.05 / 9.95 = 2.216 > 2. The mixed steps (P = 100…500 at 20…60 ms)
    # make b clearly positive (significant), yet the machine was noisy.
    f = fit(_dec([9.9, 10.0, 10.1, 21.8, 22.0, 22.1], [(100, 20.0), (200, 30.0), (300, 40.0), (400, 50.0)]))
    assert f["significant"] and f["ci95_low"] > 0
    assert f["pure_decode_spread"] == pytest.approx(22.05 / 9.95)
    assert not f["reliable"]
    assert (
        f["why_unreliable"]
        == "pure-decode steps of one batch and context vary 2.2× (p90 / p10 > 2×): the machine was noisy"
    )
    assert _sentence(f) == (
        "prefill–decode interference: no reliable estimate — pure-decode steps of one batch and context "
        "vary 2.2× (p90 / p10 > 2×): the machine was noisy (10 steps in 1 matched batch×context cell; "
        "the JSON keeps the fit)"
    )


def test_a_run_that_serves_nothing_says_nothing_of_interference() -> None:
    # 5 pure-decode steps and not one mixed step (the llm demo's shape): nothing was co-scheduled, so
    # there is no interference to estimate and no sentence about it (issue 40: it printed "no estimate")
    f = fit(_dec([10.0, 10.2, 9.9, 10.1, 10.0], []))
    assert f["mixed_steps"] == 0 and interference_sentence({"interference": f}) is None
    # one mixed step and two pure ones: 3 steps in the cell, under the 4 a fit needs: it says why
    g = fit(_dec([10.0, 10.2], [(64, 12.0)]))
    assert g["mixed_steps"] == 1
    assert (interference_sentence({"interference": g}) or "").startswith("prefill–decode interference: no ")
