"""Prefill–decode interference: how much co-scheduled prefill tokens slow a decode step.

On a shared worker a step that decodes D sequences and also runs P prefill tokens (a *mixed*
step) takes longer than a pure decode step of the same D and context. We compare them at matched
decode batch and decode context: steps that decode (``decode_seqs ≥ 1``) are grouped in cells of
(decode-batch bucket, decode-context bucket); only cells holding at least one pure-decode and one
mixed step are used. Within those cells we fit by least squares with one intercept per cell::

    step_ms = a_cell + b · prefill_tokens

``b`` (ms per prefill token) is the fitted interference cost; its 95 % confidence interval uses
Student's t with n − cells − 1 degrees of freedom. The inflation of a mixed step is b · P; a
request's TPOT inflation is Σ b · P over the steps that produced its decode tokens, divided by its
decode tokens; "share of TPOT p99 explained" = (p99 TPOT − p99 of TPOT minus that inflation) /
p99 TPOT. docs/serving.md has the definitions and their limits.

The estimate is ``reliable`` only when its 95 % interval excludes 0 and the machine was quiet: the
pure-decode steps of the matched cells, each divided by its cell's median, have a p90 / p10 spread
of at most :data:`NOISY_SPREAD` (the project's noise bar, report/spread.NOISY). Otherwise
``why_unreliable`` says which, and every screen prints "no reliable estimate" with that reason
(the JSON keeps the fitted numbers).
"""

from __future__ import annotations
from tracekit.numbers import count, plain

import math
from typing import Any

import polars as pl

MIN_STEPS = 4  # fewer matched steps than this: no estimate
NOISY_SPREAD = 2.0  # pure-decode steps of one cell varying more than this (p90 / p10): a noisy machine
MIN_SPREAD_STEPS = 3  # pure-decode steps needed to judge their spread


def decode_context(steps: pl.DataFrame) -> pl.Expr:
    """Context of the decoding sequences of a step: ``decode_ctx=`` of a ``tk:`` name (tracekit
    run serve), the generation part's ``sk`` / m of a vLLM ``execute_…`` name, else ``ctx`` of a
    pure decode step. (Kept in this one function until the labels parse it.)"""
    name = pl.col("name") if "name" in steps.columns else pl.lit(None, dtype=pl.String())
    tk = name.str.extract(r"(?:^|\s)decode_ctx=(\d+)", 1).cast(pl.Int64(), strict=False)
    gen = name.str.extract(r"_generation_(\d+)\(sq\d+sk(\d+)", 0)
    m = gen.str.extract(r"_generation_(\d+)", 1).cast(pl.Int64(), strict=False)
    sk = gen.str.extract(r"sk(\d+)", 1).cast(pl.Int64(), strict=False)
    vllm = pl.when(m > 0).then(sk // m)
    ctx = pl.col("ctx") if "ctx" in steps.columns else pl.lit(None, dtype=pl.Int64())
    return pl.coalesce(tk, vllm, pl.when(pl.col("phase") == "decode").then(ctx))


def decoding_steps(steps: pl.DataFrame) -> pl.DataFrame:
    """Steps that decode, with ``D`` (decode sequences), ``P`` (prefill tokens, 0 in a pure decode
    step), ``dctx`` (decode context) and ``ms`` (step time)."""
    if steps.height == 0:
        return pl.DataFrame(
            schema={
                "D": pl.Int64(),
                "P": pl.Int64(),
                "dctx": pl.Int64(),
                "ms": pl.Float64(),
                "phase": pl.String(),
                "step_index": pl.Int64(),
            }
        )

    def col(c: str) -> pl.Expr:
        return (pl.col(c) if c in steps.columns else pl.lit(None)).cast(pl.Int64())

    s = steps.with_row_index("step_index").with_columns(pl.col("step_index").cast(pl.Int64()))
    s = s.with_columns(
        pl.coalesce(col("decode_seqs"), pl.when(pl.col("phase") == "decode").then(col("batch"))).alias("D"),
        pl.when(pl.col("phase") == "decode")
        .then(pl.lit(0))
        .otherwise(col("prefill_tokens"))
        .cast(pl.Int64())
        .alias("P"),
        decode_context(s).alias("dctx"),
        (pl.col("step_ns") / 1e6).alias("ms"),
    )
    return s.filter(pl.col("phase").is_in(["decode", "mixed"]) & (pl.col("D") >= 1) & pl.col("P").is_not_null()).select(
        "D", "P", "dctx", "ms", "phase", "step_index"
    )


def t_quantile(p: float, dof: int) -> float:
    """Student's t quantile (Cornish–Fisher expansion around the normal; within 0.3 % for dof ≥ 3
    at p = 0.975, exact as dof → ∞)."""
    z = _norm_ppf(p)
    v = float(max(dof, 1))
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def _norm_ppf(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(80):  # bisection on the error function: exact to double precision
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def cells(dec: pl.DataFrame, ctx_buckets: int = 4) -> pl.DataFrame:
    """Add ``cell``: decode batch bucket (⌊log2 D⌋) × decode-context bucket (``ctx_buckets``
    equal-width buckets over the range seen; one bucket when the context is unknown)."""
    c = dec["dctx"].drop_nulls()
    if c.len():
        lo, hi = int(c.min()), int(c.max())  # type: ignore[arg-type]
        width = max(1, -(-(hi - lo + 1) // max(1, min(ctx_buckets, c.n_unique()))))
        cb = ((pl.col("dctx") - lo) // width).fill_null(-1)
    else:
        cb = pl.lit(-1)
    db = pl.col("D").cast(pl.Float64()).log(2).floor().cast(pl.Int64())
    return dec.with_columns(pl.format("D{}c{}", db, cb).alias("cell"))


def fit(dec: pl.DataFrame) -> dict[str, Any]:
    """The within-cell least-squares fit over matched cells (see the module docstring)."""
    d = cells(dec)
    kinds = d.group_by("cell").agg((pl.col("P") == 0).any().alias("_pure"), (pl.col("P") > 0).any().alias("_mixed"))
    matched = kinds.filter(pl.col("_pure") & pl.col("_mixed"))["cell"]
    m = d.filter(pl.col("cell").is_in(matched.implode()))
    out: dict[str, Any] = {
        "matched_steps": m.height,
        "matched_cells": matched.len(),
        "pure_decode_steps": int((m["P"] == 0).sum()) if m.height else 0,
        "mixed_steps": int((m["P"] > 0).sum()) if m.height else 0,
        "cost_ms_per_prefill_token": None,
        "ci95_low": None,
        "ci95_high": None,
        "t_stat": None,
        "dof": None,
        "significant": False,
        "pure_decode_spread": None,
        "reliable": False,
        "why_unreliable": None,
    }
    dof = m.height - matched.len() - 1
    if m.height < MIN_STEPS or dof < 1:
        out["why_none"] = (
            f"{count(m.height, 'decoding step')} in {count(matched.len(), 'matched cell')}: need ≥ {MIN_STEPS} steps "
            "in cells holding both pure-decode and mixed steps"
        )
        return out
    w = m.with_columns(
        (pl.col("P") - pl.col("P").mean().over("cell")).alias("x"),
        (pl.col("ms") - pl.col("ms").mean().over("cell")).alias("y"),
    )
    sxx = float(w.select((pl.col("x") ** 2).sum()).item())
    if sxx <= 0:
        out["why_none"] = "no variation in prefill tokens within matched cells"
        return out
    b = float(w.select((pl.col("x") * pl.col("y")).sum()).item()) / sxx
    sse = float(w.select(((pl.col("y") - b * pl.col("x")) ** 2).sum()).item())
    se = math.sqrt(sse / dof / sxx)
    t = t_quantile(0.975, dof)
    lo, hi = b - t * se, b + t * se
    significant = bool(lo > 0 or hi < 0)
    spread = pure_spread(m)
    noisy = spread is not None and spread > NOISY_SPREAD
    why = None
    if not significant:
        why = f"its 95 % CI ({plain(lo * 1e3)} to {plain(hi * 1e3)} µs per prefill token) includes 0"
    elif noisy:
        why = (
            f"pure-decode steps of one batch and context vary {plain(spread or 0.0, 2)}× "
            f"(p90 / p10 > {plain(NOISY_SPREAD, 2)}×): the machine was noisy"
        )
    out.update(
        cost_ms_per_prefill_token=b,
        ci95_low=lo,
        ci95_high=hi,
        t_stat=b / se if se > 0 else math.inf,
        dof=dof,
        significant=significant,
        pure_decode_spread=spread,
        reliable=why is None,
        why_unreliable=why,
    )
    return out


def pure_spread(m: pl.DataFrame) -> float | None:
    """p90 / p10 of the matched cells' pure-decode step times, each divided by its cell's median
    (linear quantiles); None with fewer than :data:`MIN_SPREAD_STEPS` of them."""
    r = (
        m.filter(pl.col("P") == 0)
        .select((pl.col("ms") / pl.col("ms").median().over("cell")).alias("r"))
        .get_column("r")
        .drop_nulls()
    )
    if r.len() < MIN_SPREAD_STEPS:
        return None
    p10 = float(r.quantile(0.1, interpolation="linear"))  # type: ignore[arg-type]
    p90 = float(r.quantile(0.9, interpolation="linear"))  # type: ignore[arg-type]
    return p90 / p10 if p10 > 0 else None


def interference(
    steps: pl.DataFrame, tokens: pl.DataFrame | None = None, requests: pl.DataFrame | None = None
) -> dict[str, Any]:
    """The fitted interference and what it costs. ``tokens``: per-request token segments
    (:func:`tracekit.analysis.serving.metrics.request_tokens`, with ``step``) and ``requests`` (trace
    TTFT/TPOT rows) give the per-request TPOT explanation; without them the step-level one."""
    dec = decoding_steps(steps)
    out = fit(dec)
    mixed = dec.filter(pl.col("P") > 0)
    pure = dec.filter(pl.col("P") == 0)
    out["mixed_step_p50_ms"] = float(mixed["ms"].median()) if mixed.height else None  # type: ignore[arg-type]
    out["decode_step_p50_ms"] = float(pure["ms"].median()) if pure.height else None  # type: ignore[arg-type]
    out["mean_prefill_tokens_per_mixed_step"] = float(mixed["P"].mean()) if mixed.height else None  # type: ignore[arg-type]
    b = out["cost_ms_per_prefill_token"]
    if b is None:
        return out
    infl = max(b, 0.0)
    out["mean_mixed_step_inflation_ms"] = infl * out["mean_prefill_tokens_per_mixed_step"] if mixed.height else 0.0
    out["tpot_p99_ms"], out["tpot_p99_without_ms"], out["tpot_p99_share_explained"], out["tpot_basis"] = _tpot_share(
        steps, dec, infl, tokens, requests
    )
    return out


def _tpot_share(
    steps: pl.DataFrame, dec: pl.DataFrame, b: float, tokens: pl.DataFrame | None, requests: pl.DataFrame | None
) -> tuple[float | None, float | None, float | None, str]:
    if tokens is not None and requests is not None and tokens.height and requests.height:
        pstep = dec.select(pl.col("step_index"), (pl.col("P") * b).alias("_inf"))
        order = steps.with_row_index("step_index").select(
            pl.col("step_index").cast(pl.Int64()), pl.col("step").cast(pl.Int64())
        )
        inf = (
            tokens.filter(pl.col("kind") == "decode")
            .join(order, on="step", how="left")
            .join(pstep, on="step_index", how="left")
            .group_by("request")
            .agg(pl.col("_inf").fill_null(0.0).sum().alias("_sum"), pl.len().alias("_n"))
        )
        r = requests.filter(pl.col("tpot_ms").is_not_null()).join(inf, on="request", how="left")
        if r.height:
            adj = r["tpot_ms"] - (r["_sum"].fill_null(0.0) / r["_n"].fill_null(1))
            p99 = float(r["tpot_ms"].quantile(0.99, interpolation="linear"))  # type: ignore[arg-type]
            p99w = float(adj.quantile(0.99, interpolation="linear"))  # type: ignore[arg-type]
            return p99, p99w, (p99 - p99w) / p99 if p99 > 0 else None, "per request (trace request ids)"
    if dec.height == 0:
        return None, None, None, "none"
    w = dec.select(
        pl.col("ms").repeat_by("D").explode(), (pl.col("ms") - b * pl.col("P")).repeat_by("D").explode().alias("adj")
    )
    p99 = float(w["ms"].quantile(0.99, interpolation="linear"))  # type: ignore[arg-type]
    p99w = float(w["adj"].quantile(0.99, interpolation="linear"))  # type: ignore[arg-type]
    return p99, p99w, (p99 - p99w) / p99 if p99 > 0 else None, "per decoded token (step time, no request ids)"
