"""Measured serving costs for the what-if (docs/whatif.md): a step-cost model fitted to the trace's
steps, and the KV-cache bytes per token from the attention shapes.

Step cost (non-negative least squares over every step with a known composition)::

    step_ms = c0 + cp · P + cd · D + ck · (D · ctx_d)

P = prefill tokens, D = decoding sequences, ctx_d = their context (so D·ctx_d ≈ KV entries the
decode attention reads). A prefill of n tokens alone costs c0 + cp·n; a decode step of D
sequences at context c costs c0 + cd·D + ck·D·c. Terms the trace cannot separate (no variation)
are dropped and said so.
"""

from __future__ import annotations
from tracekit.numbers import count

from typing import Any

import polars as pl
from tracekit.analysis.serving.nnls import nnls
from tracekit.analysis.serving.interference import decoding_steps

TERMS = ("intercept_ms", "per_prefill_token_ms", "per_decode_seq_ms", "per_decode_kv_token_ms")
ELEMENT_BYTES = {
    "float": 4,
    "double": 8,
    "c10::BFloat16": 2,
    "c10::Half": 2,
    "BFloat16": 2,
    "Half": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}
# A fit is refused (the what-if does not simulate with it) below this R²: the steps' composition
# explains too little of their time to predict anything (docs/whatif.md, "The fit"). The residuals'
# spread is not a refusal: it is the host's noise, carried into the replay and its interval.
MIN_R2 = 0.5
NOISE_QUANTILES = 20  # measured / fitted at the midpoints of 20 equal-probability bins (2.5 %, 7.5 %, ...)
# The host's slow drift: the kept steps in time order cut into DRIFT_BLOCKS runs of consecutive
# steps, each run's median measured / fitted (``drift_ratios``); a replay draws one of them for its
# whole run (a host that is slower or faster for a while), the steps' own noise around it. Needs at
# least MIN_BLOCK_STEPS steps per block.
DRIFT_BLOCKS = 5
MIN_BLOCK_STEPS = 4
# Steps slower than the fit by more than OUTLIER_MADS robust deviations are host noise (left out of
# the fit, their excess time kept as noise per step), unless more than MAX_OUTLIER_SHARE of them are.
OUTLIER_MADS = 5.0
MAX_OUTLIER_SHARE = 0.1
_DIMS2 = r"^\[\[(\d+), (\d+), (\d+), (\d+)\], \[(\d+), (\d+), (\d+), (\d+)\]"


def fit_step_cost(steps: pl.DataFrame) -> dict[str, Any]:
    """The step-cost model over ``steps`` (columns P, D, dctx, ms as from
    :func:`tracekit.analysis.serving.interference.decoding_steps`, plus prefill-only steps), fitted by
    non-negative least squares (:mod:`tracekit.analysis.serving.nnls`: no term may make a step
    faster). Returns the coefficients (ms), ``n``, ``r2``, the residual spread (``residual_ms``:
    p10 / p50 / p90 of measured − fitted; ``residual_rel_p90``: p90 of |residual| / measured),
    ``dropped`` terms, the ranges of P, D, ctx_d seen, the host-noise ``outliers`` left out
    (:func:`inliers`) with their ``outlier_excess_ms`` and ``noise_share`` (of all step time), and
    ``noise_ratios``: measured / fitted of the kept steps at :data:`NOISE_QUANTILES` equal-probability
    quantiles (the host's noise the replay draws from), ``drift_ratios``: with ``step_index`` (time
    order) and :data:`MIN_BLOCK_STEPS` steps per block, the median ratio of each of
    :data:`DRIFT_BLOCKS` runs of consecutive steps, and then ``noise_ratios`` are each step's ratio
    over its block's (:func:`drift`); and ``refused``: why the fit is too poor to simulate with
    (R² < :data:`MIN_R2`), else None."""
    out: dict[str, Any] = {k: None for k in TERMS} | {"n": steps.height, "r2": None, "dropped": [], "refused": None}
    s = steps.drop_nulls(["P", "D", "ms"]).with_columns(pl.col("dctx").fill_null(0))
    if s.height < 2:
        out["why_none"] = f"{count(s.height, 'step')} with a known composition: need ≥ 2"
        return out
    import numpy as np  # only to fit: summary and analysis start-up stay numpy-free

    y = s["ms"].to_numpy().astype(float)
    cols = {
        "intercept_ms": np.ones(s.height),
        "per_prefill_token_ms": s["P"].to_numpy().astype(float),
        "per_decode_seq_ms": s["D"].to_numpy().astype(float),
        "per_decode_kv_token_ms": (s["D"] * s["dctx"]).to_numpy().astype(float),
    }
    keep = [k for k, v in cols.items() if k == "intercept_ms" or float(np.ptp(v)) > 0]
    keep = keep[: max(1, min(len(keep), s.height - 1))]
    out["dropped"] = [k for k in TERMS if k not in keep]
    x_all = np.column_stack([cols[k] for k in keep])
    inl = inliers(x_all, y)
    x, y_all, y = x_all[inl], y, y[inl]
    coef = nnls(x, y)
    resid = y - x @ coef
    tss = float(((y - y.mean()) ** 2).sum())
    excess = y_all[~inl] - x_all[~inl] @ coef
    out["outliers"] = int((~inl).sum())
    out["outlier_excess_ms"] = float(excess.sum())
    # the outliers' share of the measured step time: the replay predicts a quiet machine, and says so
    out["noise_share"] = float(excess.sum() / y_all.sum()) if y_all.sum() > 0 else 0.0
    out.update({k: float(c) for k, c in zip(keep, coef)})
    for k in out["dropped"]:
        out[k] = 0.0
    out["r2"] = 1 - float((resid**2).sum()) / tss if tss > 0 else None
    out["residual_ms"] = {f"p{q}": float(np.percentile(resid, q)) for q in (10, 50, 90)}
    rel = np.abs(resid) / np.where(y > 0, y, np.nan)
    out["residual_rel_p90"] = float(np.nanpercentile(rel, 90)) if np.isfinite(rel).any() else None
    fitted = x @ coef
    pos = fitted > 0
    ratio = (y / fitted)[pos]
    order = s["step_index"].to_numpy()[inl][pos] if "step_index" in s.columns else None
    blocks, ratio = drift(ratio, order)
    out["drift_ratios"] = blocks
    mid = (np.arange(NOISE_QUANTILES) + 0.5) / NOISE_QUANTILES * 100
    out["noise_ratios"] = [round(float(v), 4) for v in np.percentile(ratio, mid)] if ratio.size else []
    out["ranges"] = {c: [int(s[c].min()), int(s[c].max())] for c in ("P", "D", "dctx")}  # type: ignore[arg-type]
    out["refused"] = refusal(out["r2"])
    return out


def drift(ratio: Any, order: Any) -> tuple[list[float], Any]:
    """(``drift_ratios``, the ratios the steps' own noise is drawn from). ``ratio``: measured / fitted
    per kept step; ``order``: their step indices (time order), or None. With at least
    :data:`MIN_BLOCK_STEPS` · :data:`DRIFT_BLOCKS` steps: the steps in time order cut into
    :data:`DRIFT_BLOCKS` consecutive runs, each run's median ratio, and each step's ratio over its
    run's median (their product is the step's ratio again). Otherwise no drift and the ratios as
    they are."""
    import numpy as np

    if order is None or ratio.size < DRIFT_BLOCKS * MIN_BLOCK_STEPS:
        return [], ratio
    r = ratio[np.argsort(order, kind="stable")]
    parts = np.array_split(r, DRIFT_BLOCKS)
    med = [float(np.median(b)) for b in parts]
    within = np.concatenate([b / m for b, m in zip(parts, med)]) if all(m > 0 for m in med) else r
    return [round(m, 4) for m in med], within


def inliers(x: Any, y: Any) -> Any:
    """Steps kept by the fit: all but those slower than the fit by more than :data:`OUTLIER_MADS`
    robust deviations (1.4826 × the median absolute deviation of the residuals) — a step the host
    preempted (a busy machine) is slower, never faster — unless that would drop more than
    :data:`MAX_OUTLIER_SHARE` of them (then the model, not the host, is at fault: all are kept).
    Two rounds: fit, drop, fit again, drop."""
    import numpy as np

    keep = np.ones(len(y), dtype=bool)
    for _ in range(2):
        r = y - x @ nnls(x[keep], y[keep])
        med = float(np.median(r[keep]))
        # a floor for a perfect fit of the rest (MAD 0): a millionth of the largest step time
        scale = max(1.4826 * float(np.median(np.abs(r[keep] - med))), 1e-6 * float(np.abs(y).max()))
        new = r - med <= OUTLIER_MADS * scale
        if (~new).sum() > MAX_OUTLIER_SHARE * len(y) or len(y) - (~new).sum() < x.shape[1] + 1:
            return np.ones(len(y), dtype=bool)
        keep = new
    return keep


def refusal(r2: float | None) -> str | None:
    """Why a fit is too poor to simulate with, or None (docs/whatif.md, "The fit")."""
    if r2 is not None and r2 < MIN_R2:
        return f"R² {r2:.2f} < {MIN_R2}: the steps' composition explains too little of their time"
    return None


def busy_gap_ms(steps: pl.DataFrame) -> float | None:
    """Median host time between one step's done and the next step's start when the next step
    decodes (sequences were waiting, so the loop did not sleep for an arrival): the serving loop's
    own time per step outside the step's annotation, which a replay adds to every step. None
    without two such steps."""
    if steps.height < 2 or not {"cpu_start_ns", "done_ns"} <= set(steps.columns):
        return None

    dec = decoding_steps(steps).select("step_index")
    s = steps.with_row_index("step_index").with_columns(pl.col("step_index").cast(pl.Int64()))
    s = s.with_columns(((pl.col("cpu_start_ns") - pl.col("done_ns").shift(1)) / 1e6).alias("_gap"))
    g = s.join(dec, on="step_index", how="semi")["_gap"].drop_nulls()
    g = g.filter(g >= 0)
    return float(g.median()) if g.len() else None  # type: ignore[arg-type]


def all_steps(steps: pl.DataFrame) -> pl.DataFrame:
    """Every step with P, D, dctx, ms and its ``step_index`` (``steps`` is in time order): the
    decoding steps plus prefill-only steps (D = 0), in time order."""

    dec = decoding_steps(steps).select("P", "D", "dctx", "ms", "step_index")
    if steps.height == 0 or "prefill_tokens" not in steps.columns:
        return dec
    idx = steps.with_row_index("step_index").with_columns(pl.col("step_index").cast(pl.Int64()))
    pre = idx.filter(pl.col("phase") == "prefill").select(
        pl.coalesce(pl.col("prefill_tokens"), pl.col("tokens") if "tokens" in steps.columns else pl.lit(None))
        .cast(pl.Int64())
        .alias("P"),
        pl.lit(0, dtype=pl.Int64()).alias("D"),
        pl.lit(0, dtype=pl.Int64()).alias("dctx"),
        (pl.col("step_ns") / 1e6).alias("ms"),
        pl.col("step_index"),
    )
    return pl.concat(
        [
            pre,
            dec.with_columns(
                pl.col("D").cast(pl.Int64()), pl.col("P").cast(pl.Int64()), pl.col("dctx").cast(pl.Int64())
            ),
        ]
    ).sort("step_index")


def kv_shape(ops: pl.DataFrame, regions: pl.DataFrame) -> dict[str, Any]:
    """KV-cache bytes per token = 2 (K and V) × layers × KV heads × head dim × element size, from
    the ``aten::scaled_dot_product_attention`` shapes (key = second input, ``[B, H_kv, S, d]``) and
    the number of attention calls in the first decode step (layers = calls × B / D). Returns the
    parts and ``bytes_per_token``, or ``why_none`` when the trace does not show them."""
    sd = ops.filter(pl.col("name") == "aten::scaled_dot_product_attention")
    if sd.height == 0 or "input_dims" not in ops.columns:
        return {"bytes_per_token": None, "why_none": "no aten::scaled_dot_product_attention with shapes in the trace"}
    sd = sd.filter(pl.col("depth") == pl.col("depth").min()).with_columns(
        *[
            pl.col("input_dims").str.extract(_DIMS2, g).cast(pl.Int64()).alias(n)
            for g, n in ((5, "_b"), (6, "_h"), (8, "_d"))
        ],
        pl.col("input_types").list.get(1, null_on_oob=True).alias("_t")
        if "input_types" in ops.columns
        else pl.lit(None).alias("_t"),
    )
    sd = sd.drop_nulls("_h")
    dec = regions.filter(pl.col("phase") == "decode") if "phase" in regions.columns else regions.clear()
    dcol = [c for c in ("decode_seqs", "batch") if c in dec.columns]
    dec = dec.with_columns(pl.coalesce(*dcol).alias("_D") if dcol else pl.lit(None).alias("_D")).drop_nulls("_D")
    if sd.height == 0 or dec.height == 0:
        return {"bytes_per_token": None, "why_none": "no decode step with a batch size and attention shapes"}
    first = dec.sort("start_ns").row(0, named=True)
    inside = sd.filter((pl.col("start_ns") >= first["start_ns"]) & (pl.col("start_ns") <= first["end_ns"]))
    if inside.height == 0:
        return {"bytes_per_token": None, "why_none": "no attention call inside the first decode step"}
    b = float(inside["_b"].mean())  # type: ignore[arg-type]
    layers = round(inside.height * b / int(first["_D"]))
    h, d = int(inside["_h"][0]), int(inside["_d"][0])
    elem = ELEMENT_BYTES.get(str(inside["_t"][0]))
    if elem is None or layers < 1:
        return {"bytes_per_token": None, "why_none": f"unknown element type {inside['_t'][0]!r} or no layers"}
    return {
        "bytes_per_token": 2 * layers * h * d * elem,
        "layers": layers,
        "kv_heads": h,
        "head_dim": d,
        "element_bytes": elem,
        "dtype": str(inside["_t"][0]),
        "source": f"{inside.height} attention calls in decode step {first.get('name')!r} (key shape [B, {h}, S, {d}])",
    }
