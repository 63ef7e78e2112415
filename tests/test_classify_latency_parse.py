"""Thresholds / SLO parsing and the pure latency helpers, with hand-derived values."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.analysis import Slo, Thresholds
from tracekit.analysis.serving.latency import decode_by_ctx, sidecar_requests
from tracekit.errors import UsageError


def test_thresholds_parse() -> None:
    assert Thresholds.parse(None) == Thresholds(0.5, 0.5)
    assert Thresholds.parse("busy=0.4,coverage=0.3") == Thresholds(overhead_busy_ratio=0.4, min_coverage=0.3)
    for bad in ("busy", "speed=0.1", "busy=x", "coverage=1.5"):
        with pytest.raises(UsageError):
            Thresholds.parse(bad)


def test_slo_parse() -> None:
    assert Slo.parse("ttft=200,tpot=50") == Slo(ttft_ms=200.0, tpot_ms=50.0)
    assert Slo.parse(None) is None
    for bad in ("ttft", "itl=3", "ttft=-1", "tpot=abc"):
        with pytest.raises(UsageError):
            Slo.parse(bad)


def test_sidecar_requests_units() -> None:
    # ttft_ns 2_000_000 → 2 ms; tpot_ns 500_000 → 0.5 ms; e2el from finish − arrival = 5 ms.
    df = sidecar_requests(
        {
            "requests": [
                {
                    "ttft_ns": 2_000_000,
                    "tpot_ns": 500_000,
                    "arrival_ns": 1_000_000,
                    "finish_ns": 6_000_000,
                    "output_tokens": 7,
                }
            ]
        }
    )
    r = df.row(0, named=True)
    assert (r["ttft_ms"], r["tpot_ms"], r["e2el_ms"], r["output_tokens"]) == (2.0, 0.5, 5.0, 7)
    assert sidecar_requests(None).height == 0 and sidecar_requests({"requests": "x"}).height == 0


def test_decode_by_ctx_buckets() -> None:
    # ctx 100..115 (16 distinct) → 8 buckets of width ceil(16/8) = 2: [100,101], [102,103], ...
    steps = pl.DataFrame(
        {
            "phase": ["decode"] * 16,
            "ctx": list(range(100, 116)),
            "step_ns": [1_000_000 * (1 + i // 2) for i in range(16)],
        }
    )
    b = decode_by_ctx(steps)
    assert b.height == 8 and b.row(0, named=True)["ctx_lo"] == 100 and b.row(0, named=True)["ctx_hi"] == 101
    assert b["mean_ms"].to_list() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert b["steps"].to_list() == [2] * 8
