"""Serving metrics from the trace alone (docs/serving.md).

Two levels, both from the phase units of :func:`tracekit.analysis.serving.latency.step_table` (one row
per forward step in time order, with ``cpu_start_ns`` and ``done_ns``):

- **Per request**, when the steps carry the request encoding of ``tracekit run serve``
  (``dc=`` / ``pf=`` / ``arr=``, :func:`tracekit.annotate.request_attrs`): every request's
  arrival, the step that sampled its first token, every later token's step, hence TTFT, TPOT,
  ITL and end-to-end latency exactly as vLLM's serving benchmark defines them.
- **Per step**, for any trace whose steps say their composition (vLLM ``execute_…`` / SGLang
  ``step[…]`` names, ``tk:`` names): step time by (phase, decode sequences, prefill tokens,
  context) and ITL as the decode step period.

All vectorised polars: the id lists are split and exploded, never looped over in Python.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from tracekit.numbers import count
from tracekit.analysis.serving.schemas import BYCTX_SCHEMA, REQUEST_SCHEMA
from tracekit.analysis.serving.interference import interference
from tracekit.analysis.serving.step_cost import all_steps
from tracekit.analysis.serving.step_cost import busy_gap_ms
from tracekit.analysis.serving.step_cost import fit_step_cost

TOKEN_SCHEMA: dict[str, pl.DataType] = {
    "request": pl.Int64(),
    "step": pl.Int64(),
    "kind": pl.String(),
    "tokens": pl.Int64(),
    "samples": pl.Boolean(),
    "cpu_start_ns": pl.Int64(),
    "done_ns": pl.Int64(),
}
COMPOSITION_SCHEMA: dict[str, pl.DataType] = {
    "phase": pl.String(),
    "decode_seqs": pl.Int64(),
    "prefill_lo": pl.Int64(),
    "prefill_hi": pl.Int64(),
    **BYCTX_SCHEMA,
}
_DC = r"(?:^|\s)dc=(\S+)"
_PF = r"(?:^|\s)pf=(\S+)"
_ARR = r"(?:^|\s)arr=(\S+)"


def has_request_encoding(steps: pl.DataFrame) -> bool:
    """True when some step name carries ``dc=``, ``pf=`` or ``arr=`` (a ``tracekit run serve`` trace)."""
    if steps.height == 0 or "name" not in steps.columns:
        return False
    return bool(steps["name"].str.contains(r"(?:^|\s)(?:dc|pf|arr)=").any())


def request_tokens(steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(segments, arrivals, malformed): one row per (request, step) the request is served in
    (TOKEN_SCHEMA: kind ``decode`` or ``prefill``, its tokens, whether it sampled an output
    token), the arrivals ``request, arrival_ns`` (step start − the encoded wait), and the number
    of list items that did not parse (counted, never silently dropped)."""
    base = steps.with_row_index("_u").select(
        "_u",
        pl.col("step").cast(pl.Int64()),
        pl.col("cpu_start_ns").cast(pl.Int64()),
        pl.col("done_ns").cast(pl.Int64()),
        pl.col("name"),
    )
    dc = _items(base, _DC).with_columns(
        pl.col("_item").str.extract(r"^(\d+)(?:-(\d+))?$", 1).cast(pl.Int64()).alias("_lo"),
        pl.col("_item").str.extract(r"^(\d+)(?:-(\d+))?$", 2).cast(pl.Int64()).alias("_hi"),
    )
    bad = int(dc["_lo"].null_count())
    dc = dc.drop_nulls("_lo").with_columns(pl.int_ranges("_lo", pl.coalesce("_hi", "_lo") + 1).alias("request"))
    dc = (
        dc.explode("request")
        .with_columns(pl.col("request").cast(pl.Int64()))
        .select(
            "request",
            "step",
            pl.lit("decode").alias("kind"),
            pl.lit(1, dtype=pl.Int64()).alias("tokens"),
            pl.lit(True).alias("samples"),
            "cpu_start_ns",
            "done_ns",
            "_u",
        )
    )
    pf = _items(base, _PF)
    pf = pf.with_columns(
        *[
            pl.col("_item").str.extract(r"^(\d+):(\d+)(!?)$", g).alias(n)
            for g, n in ((1, "_id"), (2, "_n"), (3, "_last"))
        ]
    )
    bad += int(pf["_id"].null_count())
    pf = pf.drop_nulls("_id").select(
        pl.col("_id").cast(pl.Int64()).alias("request"),
        "step",
        pl.lit("prefill").alias("kind"),
        pl.col("_n").cast(pl.Int64()).alias("tokens"),
        (pl.col("_last") == "!").alias("samples"),
        "cpu_start_ns",
        "done_ns",
        "_u",
    )
    segs = pl.concat([dc, pf]).sort("_u", "request").drop("_u")
    segs = segs.select([pl.col(c).cast(t) for c, t in TOKEN_SCHEMA.items()])
    arr = _items(base, _ARR).with_columns(
        pl.col("_item").str.extract(r"^(\d+):(\d+)$", 1).cast(pl.Int64()).alias("request"),
        pl.col("_item").str.extract(r"^(\d+):(\d+)$", 2).cast(pl.Int64()).alias("_us"),
    )
    bad += int(arr["request"].null_count())
    arr = arr.drop_nulls("request").select(
        "request", (pl.col("cpu_start_ns") - pl.col("_us") * 1000).alias("arrival_ns")
    )
    return segs, arr.unique("request", keep="first", maintain_order=True), bad


def _items(base: pl.DataFrame, pattern: str) -> pl.DataFrame:
    return (
        base.with_columns(pl.col("name").str.extract(pattern, 1).alias("_list"))
        .drop_nulls("_list")
        .with_columns(pl.col("_list").str.split(",").alias("_item"))
        .explode("_item")
    )


def encoded_requests(steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series, list[str]]:
    """Per request (REQUEST_SCHEMA, ``source`` = ``trace``), the ITLs in ms, and notes.

    A request's token times are the ``done_ns`` of the steps that sampled one of its tokens: the
    prefill chunk marked ``!`` (first token) and each decode step. With the arrival from ``arr``:
    TTFT = first token − arrival; E2E = last token − arrival; TPOT = (last − first) / (tokens − 1);
    ITL = gaps between consecutive token times. Requests whose arrival or first token lies
    outside the trace are left out and counted in a note."""
    notes: list[str] = []
    segs, arr, bad = request_tokens(steps)
    if bad:
        notes.append(f"{count(bad, 'request-list item')} in step names did not parse and were skipped")
    # cold steps (tracekit/analysis/regions/cold.py) stay out of steady state: a request's TTFT only
    # when none of its prefill chunks is cold, E2E only when none of its steps is, TPOT = the mean
    # gap of its warm decode tokens (= (last − first) / (tokens − 1) without a cold step)
    cold_steps = (
        steps.filter(pl.col("cold_ns").fill_null(0) > 0).select(pl.col("step").cast(pl.Int64()))
        if "cold_ns" in steps.columns and "step" in steps.columns
        else pl.DataFrame(schema={"step": pl.Int64()})
    )
    segs = segs.with_columns(pl.col("step").is_in(cold_steps["step"].implode()).fill_null(False).alias("_cold"))
    cold = segs.group_by("request").agg(
        (pl.col("_cold") & (pl.col("kind") == "prefill")).any().alias("_cold_first"),
        pl.col("_cold").any().alias("_cold_any"),
    )
    toks = segs.filter(pl.col("samples")).sort("request", "done_ns")
    toks = toks.with_columns((pl.col("done_ns") - pl.col("done_ns").shift(1).over("request")).alias("_gap"))
    warm_dec = (pl.col("kind") == "decode") & ~pl.col("_cold")
    g = (
        toks.group_by("request")
        .agg(
            pl.col("done_ns").filter(pl.col("kind") == "prefill").first().alias("_first"),
            pl.col("done_ns").max().alias("_last"),
            pl.len().cast(pl.Int64()).alias("output_tokens"),
            (pl.col("kind") == "prefill").sum().alias("_nfirst"),
            pl.col("_gap").filter(warm_dec).mean().alias("_tpot"),
        )
        .join(arr, on="request", how="left")
        .join(cold, on="request", how="left")
    )
    complete = g.filter(pl.col("_first").is_not_null() & pl.col("arrival_ns").is_not_null() & (pl.col("_nfirst") == 1))
    dropped = g.height - complete.height
    if dropped:
        notes.append(
            f"{count(dropped, 'request')} only partly inside the trace (arrival or first token not traced): "
            "left out of TTFT/TPOT/E2E"
        )
    keep = complete["request"].implode()
    itl = toks.filter(pl.col("request").is_in(keep) & warm_dec)["_gap"].drop_nulls()
    out = complete.sort("request").with_columns(
        pl.lit("trace").alias("source"),
        pl.lit(1).alias("sequences"),
        pl.col("arrival_ns").alias("start_ns"),
        pl.when(~pl.col("_cold_first")).then((pl.col("_first") - pl.col("arrival_ns")) / 1e6).alias("ttft_ms"),
        pl.when(pl.col("output_tokens") > 1).then(pl.col("_tpot") / 1e6).alias("tpot_ms"),
        pl.when(~pl.col("_cold_any")).then((pl.col("_last") - pl.col("arrival_ns")) / 1e6).alias("e2el_ms"),
        pl.lit(None, dtype=pl.Boolean()).alias("meets_slo"),
    )
    return (
        out.select([pl.col(c).cast(t) for c, t in REQUEST_SCHEMA.items()]),
        (itl.cast(pl.Float64()) / 1e6).alias("itl_ms"),
        notes,
    )


def step_period_itl(steps: pl.DataFrame) -> pl.Series:
    """ITL as the decode step period, for traces without request ids (vLLM / SGLang step names):
    every step that decodes (phase ``decode``, or ``mixed``) gives each of its sequences one
    token, so a sequence's inter-token gap is the time from the previous step's ``done_ns`` to
    this one's. The first step of the trace has no previous step: its own duration
    (``step_ns``: start → done) stands in, which is what a single-step decode trace reports."""
    if steps.height == 0:
        return pl.Series("itl_ms", [], dtype=pl.Float64())
    s = steps.sort("cpu_start_ns").with_columns(
        pl.coalesce(pl.col("done_ns") - pl.col("done_ns").shift(1), pl.col("step_ns")).alias("_p")
    )
    cold = (pl.col("cold_ns").fill_null(0) > 0) if "cold_ns" in s.columns else pl.lit(False)
    dec = s.filter(pl.col("phase").is_in(["decode", "mixed"]) & ~cold)  # steady state: cold steps apart
    return (dec["_p"].cast(pl.Float64()) / 1e6).alias("itl_ms")


def composition(steps: pl.DataFrame, buckets: int = 4) -> pl.DataFrame:
    """Step time by composition: one row per (phase, decode sequences, prefill-token bucket,
    context bucket). Prefill tokens and context are cut into up to ``buckets`` equal-width
    buckets over the trace's range; a step without a value falls in a null bucket."""
    if steps.height == 0:
        return pl.DataFrame(schema=COMPOSITION_SCHEMA)
    s = steps.with_columns(
        *[
            (pl.col(c) if c in steps.columns else pl.lit(None)).cast(pl.Int64()).alias(c)
            for c in ("decode_seqs", "prefill_tokens", "ctx", "batch")
        ]
    )
    s = s.with_columns(
        pl.coalesce("decode_seqs", pl.when(pl.col("phase") == "decode").then(pl.col("batch"))).alias("decode_seqs"),
        (pl.col("step_ns") / 1e6).alias("_ms"),
    )
    s, plo, phi = _bucket(s, "prefill_tokens", buckets)
    s, clo, chi = _bucket(s, "ctx", buckets)
    out = s.group_by("phase", "decode_seqs", "_b_prefill_tokens", "_b_ctx").agg(
        pl.len().cast(pl.Int64()).alias("steps"),
        pl.col("_ms").mean().alias("mean_ms"),
        pl.col("_ms").quantile(0.5, interpolation="linear").alias("p50_ms"),
        pl.col("_ms").quantile(0.9, interpolation="linear").alias("p90_ms"),
    )
    out = out.with_columns(plo.alias("prefill_lo"), phi.alias("prefill_hi"), clo.alias("ctx_lo"), chi.alias("ctx_hi"))
    order = {"prefill": 0, "mixed": 1, "decode": 2}
    out = out.sort(
        pl.col("phase").replace_strict(order, default=9), "decode_seqs", "prefill_lo", "ctx_lo", nulls_last=True
    )
    return out.select([pl.col(c).cast(t) for c, t in COMPOSITION_SCHEMA.items()])


def _bucket(s: pl.DataFrame, col: str, buckets: int) -> tuple[pl.DataFrame, pl.Expr, pl.Expr]:
    v = s[col].drop_nulls()
    b = f"_b_{col}"
    if v.len() == 0:
        none = pl.lit(None, dtype=pl.Int64())
        return s.with_columns(none.alias(b)), none, none
    lo, hi = int(v.min()), int(v.max())  # type: ignore[arg-type]
    n = max(1, min(buckets, v.n_unique()))
    width = max(1, -(-(hi - lo + 1) // n))
    s = s.with_columns(((pl.col(col) - lo) // width).alias(b))
    return s, lo + pl.col(b) * width, lo + (pl.col(b) + 1) * width - 1


def serving_summary(
    steps: pl.DataFrame,
    requests: pl.DataFrame,
    regions: pl.DataFrame | None = None,
    kv: dict[str, Any] | None = None,
    sidecar: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The serving block of an analysis (``AnalysisResult.serving``, JSON ``totals.serving``):
    step time by composition, the interference fit (:mod:`tracekit.analysis.serving.interference`), and
    per request (when the trace names them) arrival, prompt and output tokens and token times,
    which the what-if (``tracekit.whatif``) replays."""

    out: dict[str, Any] = {"composition": composition(steps).to_dicts() if steps.height else []}
    warm = steps.filter(pl.col("cold_ns").fill_null(0) == 0) if "cold_ns" in steps.columns else steps
    out["step_cost"] = fit_step_cost(all_steps(warm)) | {"gap_ms": busy_gap_ms(steps)} if steps.height else {}
    out["kv"] = kv or {}
    out["scheduler"] = scheduler_limits(regions, sidecar)
    treq = requests.filter(pl.col("source") == "trace") if requests.height else requests
    if has_request_encoding(steps):
        segs, arr, _ = request_tokens(steps)
        per = (
            segs.group_by("request")
            .agg(
                pl.col("tokens").filter(pl.col("kind") == "prefill").sum().cast(pl.Int64()).alias("prompt_tokens"),
                pl.col("done_ns")
                .filter((pl.col("kind") == "prefill") & pl.col("samples"))
                .first()
                .alias("first_token_ns"),
                pl.col("done_ns").filter(pl.col("samples")).max().alias("last_token_ns"),
                pl.col("samples").sum().cast(pl.Int64()).alias("output_tokens"),
            )
            .join(arr, on="request", how="inner")
            .filter(pl.col("first_token_ns").is_not_null())
            .sort("request")
        )
        out["requests"] = per.to_dicts()
        out["interference"] = interference(steps, segs, treq)
    else:
        out["requests"] = []
        out["interference"] = interference(steps) if steps.height else {}
    return out


def scheduler_limits(regions: pl.DataFrame | None, sidecar: dict[str, Any] | None = None) -> dict[str, Any]:
    """``token_budget``, ``max_seqs``, ``chunk`` of the ``tk:run`` container (tracekit run serve),
    else of the runner's sidecar (``scheduler``); the sidecar's ``arrival`` schedule and ``seed``
    where it has them (what ``whatif --arrival`` rescales); {} when neither says."""
    out: dict[str, Any] = {}
    side: dict[str, Any] = sidecar if isinstance(sidecar, dict) else {}
    sch: dict[str, Any] = side["scheduler"] if isinstance(side.get("scheduler"), dict) else {}
    for key in ("token_budget", "max_seqs", "chunk"):
        v = sch.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            out[key] = v
    if regions is not None and regions.height and "name" in regions.columns:
        run = regions.filter(
            pl.col("name").str.starts_with("tk:run ") & pl.col("name").str.contains(r"\btoken_budget=")
        )
        if run.height:
            name = str(run["name"][0])
            for key in ("token_budget", "max_seqs", "chunk"):
                m = re.search(rf"(?:^|\s){key}=(\d+)", name)
                if m:
                    out[key] = int(m.group(1))
    if out and isinstance(sch.get("arrival"), str):
        out["arrival"] = sch["arrival"]
        seed = side["config"].get("seed") if isinstance(side.get("config"), dict) else None
        if isinstance(seed, int) and not isinstance(seed, bool):
            out["seed"] = seed
    return out
