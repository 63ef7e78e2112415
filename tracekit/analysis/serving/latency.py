"""Serving latency from phase regions: TTFT, TPOT, ITL, decode step time by context length,
output tokens/s and goodput, with the definitions of vLLM's serving benchmark (docs/analysis.md).

The trace side works on *phase units* in time order (the outermost region of each phase, one
per forward step), each with ``cpu_start_ns`` and ``done_ns`` (the later of the CPU-side end and
the last attributed device activity: when the step's output exists). A prefill unit starts a
request batch; the decode units after it, until the next prefill, belong to that batch.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any

import polars as pl

from tracekit.analysis.regions.cold import mark_warmup, warmup_note
from tracekit.analysis.serving.schemas import BYCTX_SCHEMA, LATENCY_SCHEMA, REQUEST_SCHEMA  # noqa: F401
from tracekit.conventions import read_sidecar  # noqa: F401 (analysis.pipeline imports it from here)
from tracekit.analysis.serving.sidecar_fields import request_rows
from tracekit.errors import UsageError
from tracekit.analysis.serving import metrics as serving
from tracekit.analysis.serving.basis import NOT_SERVING
from tracekit.analysis.serving.basis import inferred_steps
from tracekit.analysis.serving.basis import omitted_note

PCTS = (0.5, 0.9, 0.99)
SLO_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms"}


@dataclass(frozen=True)
class Slo:
    """Service-level objectives in milliseconds (``--slo ttft=200,tpot=50``); None = not set."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Slo | None:
        if not text:
            return None
        vals: dict[str, float] = {}
        for part in text.split(","):
            k, sep, v = part.partition("=")
            key = SLO_KEYS.get(k.strip().lower())
            if not sep or key is None:
                raise UsageError(f"--slo: {part!r} is not KEY=MS with KEY one of ttft, tpot, e2el")
            try:
                x = float(v)
            except ValueError:
                raise UsageError(f"--slo: {v!r} is not a number of milliseconds") from None
            if not math.isfinite(x) or x <= 0:  # nan would meet every objective: 100 % goodput
                raise UsageError(f"--slo: {k.strip()}={v.strip()} must be a positive, finite number of milliseconds")
            vals[key] = x
        return cls(**vals)

    def as_dict(self) -> dict[str, float | None]:
        return {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2el_ms": self.e2el_ms}


@dataclass(frozen=True)
class Latency:
    summary: pl.DataFrame  # LATENCY_SCHEMA
    steps: pl.DataFrame
    requests: pl.DataFrame  # REQUEST_SCHEMA
    decode_by_ctx: pl.DataFrame  # BYCTX_SCHEMA
    scalars: dict[str, Any]


def step_table(units: pl.DataFrame) -> pl.DataFrame:
    """Phase units in time order with ``done_ns``, ``step_ns``, and ``request`` (the request batch
    index: 1 for the first prefill and the decode steps after it; 0 before any prefill)."""
    if units.height == 0:
        return units.with_columns(pl.lit(None, dtype=pl.Int64()).alias(c) for c in ("done_ns", "step_ns", "request"))
    done = pl.max_horizontal(pl.col("cpu_end_ns"), pl.col("last_ns").fill_null(pl.col("cpu_end_ns")))
    return (
        units.sort("cpu_start_ns")
        .with_columns(done.alias("done_ns"))
        .with_columns(
            (pl.col("done_ns") - pl.col("cpu_start_ns")).alias("step_ns"),
            (pl.col("phase") == "prefill").cast(pl.Int64()).cum_sum().alias("request"),
        )
    )


def cold_flag(steps: pl.DataFrame) -> pl.Expr:
    """``_cold``: the step is a cold start (``cold_ns`` > 0, tracekit/analysis/regions/cold.py)."""
    if "cold_ns" not in steps.columns:
        return pl.lit(False).alias("_cold")
    return (pl.col("cold_ns").fill_null(0) > 0).alias("_cold")


def _pct_row(values: pl.Series, phase: str, metric: str, source: str, unit: str) -> dict[str, Any]:
    v = values.drop_nulls().cast(pl.Float64())
    row: dict[str, Any] = {"phase": phase, "metric": metric, "source": source, "unit": unit, "count": v.len()}
    if v.len() == 0:
        return row | {k: None for k in ("mean", "p50", "p90", "p99", "min", "max")}
    # Linear interpolation between order statistics, as numpy.percentile (vLLM's benchmark) does.
    return row | {
        "mean": v.mean(),
        "min": v.min(),
        "max": v.max(),
        **{f"p{int(q * 100)}": v.quantile(q, interpolation="linear") for q in PCTS},
    }


def trace_requests(steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Per request batch (from the trace): TTFT, TPOT, e2e latency, output tokens; and the ITLs.

    TTFT = prefill start → prefill done (the prefill forward yields the first token).
    ITL = gap between consecutive token times (prefill done, then each decode step's done).
    TPOT = (last token time − first token time) / (decode steps), i.e. vLLM's
    (e2el − ttft) / (output tokens − 1) per sequence.
    """
    empty = pl.DataFrame(schema=REQUEST_SCHEMA)
    s = steps.filter((pl.col("request") >= 1) & pl.col("phase").is_in(["prefill", "decode"]))
    if s.height == 0:
        return empty, pl.Series("itl_ms", [], dtype=pl.Float64())
    s = s.with_columns((pl.col("done_ns") - pl.col("done_ns").shift(1).over("request")).alias("_itl"), cold_flag(s))
    warm_dec = (pl.col("phase") == "decode") & ~pl.col("_cold")
    itl = s.filter(warm_dec)["_itl"].drop_nulls().cast(pl.Float64()) / 1e6
    batch = pl.col("batch").fill_null(1) if "batch" in s.columns else pl.lit(1)
    g = (
        s.group_by("request")
        .agg(
            pl.col("cpu_start_ns").filter(pl.col("phase") == "prefill").first().alias("start_ns"),
            pl.col("done_ns").filter(pl.col("phase") == "prefill").first().alias("_first"),
            pl.col("done_ns").max().alias("_last"),
            (pl.col("phase") == "decode").sum().cast(pl.Int64()).alias("_n"),
            pl.col("_itl").filter(warm_dec).mean().alias("_tpot"),
            pl.col("_cold").filter(pl.col("phase") == "prefill").any().alias("_cold_first"),
            pl.col("_cold").any().alias("_cold_any"),
            batch.filter(pl.col("phase") == "prefill").first().cast(pl.Int64()).alias("sequences"),
        )
        .sort("request")
    )
    # steady state (cold steps, tracekit/analysis/regions/cold.py, left out): TPOT = the mean gap of
    # the warm decode steps (= (last − first) / decode steps without a cold step); TTFT only with a
    # warm prefill, E2E only without any cold step
    g = g.with_columns(
        pl.lit("trace").alias("source"),
        pl.when(~pl.col("_cold_first")).then((pl.col("_first") - pl.col("start_ns")) / 1e6).alias("ttft_ms"),
        pl.when(pl.col("_n") > 0).then(pl.col("_tpot") / 1e6).alias("tpot_ms"),
        pl.when(~pl.col("_cold_any")).then((pl.col("_last") - pl.col("start_ns")) / 1e6).alias("e2el_ms"),
        (pl.col("_n") + 1).cast(pl.Int64()).alias("output_tokens"),
        pl.lit(None, dtype=pl.Boolean()).alias("meets_slo"),
    )
    return g.select([pl.col(c).cast(t) for c, t in REQUEST_SCHEMA.items()]), itl.alias("itl_ms")


def sidecar_requests(sidecar: dict[str, Any] | None, notes: list[str] | None = None) -> pl.DataFrame:
    """Requests measured by the runner's wall clock (sidecar ``requests``: ``ttft_ns``/``ttft_ms``,
    ``tpot_ns``/``tpot_ms``, ``e2el``/``latency``, ``output_tokens``), REQUEST_SCHEMA; empty if none.
    Fields of the wrong type or range are dropped and counted in one warning, added to ``notes``
    (analysis/sidecar_fields.py)."""
    rows, warnings = request_rows(sidecar)
    if notes is not None:
        notes.extend(warnings)
    extra = {"source": "sidecar", "sequences": 1, "start_ns": None, "meets_slo": None}
    return pl.DataFrame([{**r, **extra} for r in rows], schema=REQUEST_SCHEMA)


def apply_slo(requests: pl.DataFrame, slo: Slo | None) -> pl.DataFrame:
    """``meets_slo`` per request: every set objective holds (TPOT only checked with > 1 token)."""
    if slo is None or requests.height == 0:
        return requests
    ok = pl.lit(True)
    if slo.ttft_ms is not None:
        ok = ok & (pl.col("ttft_ms") <= slo.ttft_ms).fill_null(False)
    if slo.tpot_ms is not None:
        ok = ok & ((pl.col("output_tokens").fill_null(1) <= 1) | (pl.col("tpot_ms") <= slo.tpot_ms).fill_null(False))
    if slo.e2el_ms is not None:
        ok = ok & (pl.col("e2el_ms") <= slo.e2el_ms).fill_null(False)
    return requests.with_columns(ok.alias("meets_slo"))


def decode_by_ctx(steps: pl.DataFrame, buckets: int = 8) -> pl.DataFrame:
    """Decode step time per context-length bucket: up to ``buckets`` equal-width buckets between
    the smallest and largest ``ctx`` seen (fewer when there are fewer distinct lengths), without
    the warm-up steps (``warmup``)."""
    if "ctx" not in steps.columns:
        return pl.DataFrame(schema=BYCTX_SCHEMA)
    d = steps.filter((pl.col("phase") == "decode") & pl.col("ctx").is_not_null())
    if "warmup" in d.columns:  # steps before step times settle are no context trend (regions/cold.py)
        d = d.filter(~pl.col("warmup").fill_null(False))
    if d.height == 0:
        return pl.DataFrame(schema=BYCTX_SCHEMA)
    lo, hi = int(d["ctx"].min()), int(d["ctx"].max())  # type: ignore[arg-type]
    n = max(1, min(buckets, d["ctx"].n_unique()))
    width = max(1, -(-(hi - lo + 1) // n))
    b = ((pl.col("ctx") - lo) // width).cast(pl.Int64())
    out = (
        d.with_columns(b.alias("_b"), (pl.col("step_ns") / 1e6).alias("_ms"))
        .group_by("_b")
        .agg(
            pl.len().cast(pl.Int64()).alias("steps"),
            pl.col("_ms").mean().alias("mean_ms"),
            pl.col("_ms").quantile(0.5, interpolation="linear").alias("p50_ms"),
            pl.col("_ms").quantile(0.9, interpolation="linear").alias("p90_ms"),
        )
        .sort("_b")
    )
    out = out.with_columns(
        (lo + pl.col("_b") * width).alias("ctx_lo"), (lo + (pl.col("_b") + 1) * width - 1).alias("ctx_hi")
    )
    return out.select([pl.col(c).cast(t) for c, t in BYCTX_SCHEMA.items()])


def latency(units: pl.DataFrame, sidecar: dict[str, Any] | None = None, slo: Slo | None = None) -> Latency:
    """All latency outputs from the phase units (and the runner's sidecar when there is one)."""

    steps = step_table(units)
    if steps.height:  # warm-up from the data: steps before step times settle (regions/cold.py)
        steps = steps.join(mark_warmup(steps), on="region_id", how="left", maintain_order="left")
    notes: list[str] = [n for n in (warmup_note(steps),) if n is not None]
    # serving figures only from steps a server ran (tracekit/analysis/serving/basis.py)
    inferred = inferred_steps(steps)
    served = steps.filter(~inferred) if inferred.any() else steps
    itl_source = "requests"
    if serving.has_request_encoding(served):
        # tracekit run serve: the steps name the requests they serve (docs/serving.md).
        treq, itl, more = serving.encoded_requests(served)
        notes.extend(more)
    elif served.height and (served["phase"] == "mixed").any():
        # Continuous batching: a step serves several requests at different stages, so prefill
        # regions do not delimit requests; only the runner's own records (sidecar) can.
        treq, itl = trace_requests(served.clear())
        notes.append(
            "continuous batching (mixed steps): requests cannot be told apart in the trace, so TTFT/TPOT/ITL "
            "come only from the runner's sidecar when present; step times are from the trace"
        )
    else:
        treq, itl = trace_requests(served)
    if itl.len() == 0 and served.height and served["phase"].is_in(["decode", "mixed"]).any():
        itl, itl_source = serving.step_period_itl(served), "decode step period"
        notes.append(
            "ITL = decode step period (no request ids in the trace): done of one decoding step → done "
            "of the next; the first step's own duration when it has no predecessor"
        )
    sreq = sidecar_requests(sidecar, notes)
    # no serving step and no runner's record: the serving figures are omitted, and said so
    omitted = bool(inferred.any()) and served.height == 0 and sreq.height == 0
    if omitted:
        notes.append(omitted_note(int(inferred.sum())))
    rows = _percentile_rows(steps, treq, itl, sreq, serving.has_request_encoding(served))
    summary = pl.DataFrame(rows, schema=LATENCY_SCHEMA)
    # Goodput counts requests: the runner's own when it recorded them, else the trace's batches
    # (each sequence of a batch shares its batch's TTFT and TPOT).
    treq, sreq = apply_slo(treq, slo), apply_slo(sreq, slo)
    encoded = serving.has_request_encoding(served) and treq.height > 0
    # the runner's sidecar measured its requests: the trace's steps then give the duration
    basis = steps if sreq.height else served
    scalars = _scalars(basis, treq if encoded else (sreq if sreq.height else treq), slo, exact_tokens=encoded)
    scalars["requests_source"] = (
        "trace (request ids in step names)" if encoded else ("sidecar" if sreq.height else "trace")
    )
    scalars["notes"] = notes
    # the figures above were omitted: say why wherever they would appear
    scalars["serving_figures"] = NOT_SERVING if omitted else None
    scalars["itl_source"] = itl_source if itl.len() else None
    requests = pl.concat([treq, sreq]) if sreq.height else treq
    return Latency(summary, steps, requests, decode_by_ctx(steps), scalars)


def _percentile_rows(
    steps: pl.DataFrame, treq: pl.DataFrame, itl: pl.Series, sreq: pl.DataFrame, encoded: bool
) -> list[dict[str, Any]]:
    """The latency table's rows: warm step times per phase (cold steps apart), then TTFT, TPOT
    (and E2E when requests are named in the steps) from the trace and from the runner's sidecar, and ITL."""
    rows = []
    warm = steps.filter(~cold_flag(steps)) if steps.height else steps
    for ph in ("prefill", "decode", "mixed"):
        st = warm.filter(pl.col("phase") == ph)["step_ns"] if warm.height else pl.Series([], dtype=pl.Int64())
        if st.len():
            rows.append(_pct_row(st / 1e6, ph, "step_time", "trace", "ms"))
    per_request = [("ttft", "prefill"), ("tpot", "decode"), *([("e2el", "decode")] if encoded else [])]
    for source, req in (("trace", treq), ("sidecar", sreq)):
        rows += [_pct_row(req[f"{m}_ms"], ph, m, source, "ms") for m, ph in per_request if req.height]
        if source == "trace" and itl.len():
            rows.append(_pct_row(itl, "decode", "itl", "trace", "ms"))
    return rows


def _scalars(steps: pl.DataFrame, reqs: pl.DataFrame, slo: Slo | None, exact_tokens: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "output_tokens": None,
        "output_tokens_per_s": None,
        "duration_s": None,
        "goodput_req_per_s": None,
        "goodput_fraction": None,
        "slo": slo.as_dict() if slo else None,
    }
    gen = steps.filter(pl.col("phase").is_in(["prefill", "decode", "mixed"])) if steps.height else steps
    if gen.height:
        dur_s = (int(gen["done_ns"].max()) - int(gen["cpu_start_ns"].min())) / 1e9  # type: ignore[arg-type]
        tokens: int | None
        if (
            reqs.height
            and (exact_tokens or (reqs["source"] == "sidecar").all())
            and reqs["output_tokens"].null_count() == 0
        ):
            tokens = int(reqs["output_tokens"].sum())  # the runner counted them, or the trace's request ids did
        else:  # one token per sequence per forward step: batch, else decode_seqs; unknown → no line
            cands = [pl.col(c) for c in ("batch", "decode_seqs") if c in gen.columns]
            per = pl.coalesce(*cands) if cands else pl.lit(None, pl.Int64)
            known = int(gen.select(per.is_not_null().sum()).item())
            tokens = int(gen.select(per.sum()).item()) if known == gen.height else None
        out.update(
            output_tokens=tokens,
            duration_s=dur_s,
            output_tokens_per_s=tokens / dur_s if tokens is not None and dur_s > 0 else None,
        )
    if slo is not None and reqs.height and out["duration_s"]:
        w = reqs["sequences"].fill_null(1)
        good = int((w * reqs["meets_slo"].fill_null(False).cast(pl.Int64())).sum())
        out.update(goodput_req_per_s=good / out["duration_s"], goodput_fraction=good / max(1, int(w.sum())))
    return out
