"""Speculative decoding split into draft and verify, per phase: a pure function over the
analysis's regions (docs/ci.md, issue 29).

A region is a **verify** region when its name says so (SGLang ``step[TARGET_VERIFY …]``, any name
with ``verify``), a **draft** region when its name names the draft model (``step[DRAFT_EXTEND
…]``, ``draft``, ``mtp``, ``eagle``). Only the outermost region of each kind counts (a draft
region inside another draft region is not counted twice). Per phase holding either kind:

- ``verify_steps`` / ``draft_regions``: how many; ``verify_ns`` / ``draft_ns``: their device busy
  time; ``verify_share`` / ``draft_share``: of the phase's busy time;
- ``tokens_per_verify``: the mean tokens of the verify regions whose name gives them (``toks=``),
  else null;
- ``tpot_verify_ms`` / ``tpot_draft_ms``: the phase's TPOT p50 times each share: their part of
  the time per output token (null without a TPOT).

A draft region outside every phase unit — vLLM's ``gpu_model_runner: draft``, which the V1 runner
records after its ``execute_…`` step (with async scheduling, in ``sample_tokens``) — belongs to
the speculative cycle of the phase unit that started last before it: it is counted under that
unit's phase, and its busy time is added to that phase's busy time for the shares (the cycle is
the step plus its drafting; TPOT, measured from step to step, already spans both). vLLM names no
verify region: there the phase's own step units are the verify steps (the target's forward checks
the previous draft), so ``verify_steps`` is their count and ``verify_ns`` their busy time.
"""

from __future__ import annotations

import polars as pl

VERIFY_RE = r"(?i)target_verify|verify"
DRAFT_RE = r"(?i)draft|\bmtp\b|eagle"
SCHEMA = {
    "phase": pl.String(),
    "verify_steps": pl.Int64(),
    "verify_ns": pl.Int64(),
    "verify_share": pl.Float64(),
    "draft_regions": pl.Int64(),
    "draft_ns": pl.Int64(),
    "draft_share": pl.Float64(),
    "tokens_per_verify": pl.Float64(),
    "tpot_verify_ms": pl.Float64(),
    "tpot_draft_ms": pl.Float64(),
}
METRICS = [c for c in SCHEMA if c != "phase"]


def spec_regions(regions: pl.DataFrame) -> pl.DataFrame:
    """The outermost verify and draft regions: region_id, phase, spec (``verify`` / ``draft``),
    busy_ns, tokens, name."""
    empty = pl.DataFrame(
        schema={
            "region_id": pl.Int64(),
            "phase": pl.String(),
            "spec": pl.String(),
            "busy_ns": pl.Int64(),
            "tokens": pl.Int64(),
            "name": pl.String(),
            "outside": pl.Boolean(),
        }
    )
    if regions.height == 0 or not {"name", "region_id", "busy_ns"} <= set(regions.columns):
        return empty
    regions = _cycle_phase(regions)
    name = pl.col("name").cast(pl.String)
    parent = "effective_parent_id" if "effective_parent_id" in regions.columns else "parent_id"
    r = regions.select(
        pl.col("region_id").cast(pl.Int64),
        pl.col(parent).cast(pl.Int64).alias("_parent")
        if parent in regions.columns
        else pl.lit(None, pl.Int64).alias("_parent"),
        pl.col("phase").cast(pl.String) if "phase" in regions.columns else pl.lit("other").alias("phase"),
        pl.when(name.str.contains(VERIFY_RE))
        .then(pl.lit("verify"))
        .when(name.str.contains(DRAFT_RE))
        .then(pl.lit("draft"))
        .alias("spec"),
        pl.col("busy_ns").cast(pl.Int64).fill_null(0),
        (pl.col("tokens").cast(pl.Int64) if "tokens" in regions.columns else pl.lit(None, pl.Int64)).alias("tokens"),
        name.alias("name"),
    )
    r = r.with_columns(
        (regions["_outside"] if "_outside" in regions.columns else pl.repeat(False, regions.height, eager=True)).alias(
            "outside"
        )
    )
    kinds = r.select(pl.col("region_id").alias("_parent"), pl.col("spec").alias("_parent_spec"))
    r = r.filter(pl.col("spec").is_not_null()).join(kinds, on="_parent", how="left")
    out = r.filter(pl.col("_parent_spec").is_null() | (pl.col("_parent_spec") != pl.col("spec")))
    return out.select(list(empty.columns)) if out.height else empty


def speculative(regions: pl.DataFrame, phases: pl.DataFrame, latency: pl.DataFrame) -> pl.DataFrame:
    """One row per phase with verify or draft regions (``SCHEMA``); empty without any."""
    s = spec_regions(regions)
    if s.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    g = s.group_by("phase", maintain_order=True).agg(
        (pl.col("spec") == "verify").sum().cast(pl.Int64).alias("verify_steps"),
        pl.col("busy_ns").filter(pl.col("spec") == "verify").sum().cast(pl.Int64).alias("verify_ns"),
        (pl.col("spec") == "draft").sum().cast(pl.Int64).alias("draft_regions"),
        pl.col("busy_ns").filter(pl.col("spec") == "draft").sum().cast(pl.Int64).alias("draft_ns"),
        pl.col("tokens").filter(pl.col("spec") == "verify").mean().cast(pl.Float64).alias("tokens_per_verify"),
        pl.col("busy_ns").filter(pl.col("outside")).sum().cast(pl.Float64).alias("_outside_ns"),
    )
    busy = (
        phases.select(
            pl.col("phase").cast(pl.String),
            pl.col("busy_ns").cast(pl.Float64).alias("_busy"),
            (pl.col("region_count") if "region_count" in phases.columns else pl.lit(None))
            .cast(pl.Int64)
            .alias("_units"),
        )
        if phases.height and {"phase", "busy_ns"} <= set(phases.columns)
        else pl.DataFrame(schema={"phase": pl.String(), "_busy": pl.Float64(), "_units": pl.Int64()})
    )
    tpot = (
        latency.filter(pl.col("metric") == "tpot")
        .group_by(pl.col("phase").cast(pl.String))
        .agg(pl.col("p50").first().cast(pl.Float64).alias("_tpot"))
        if latency.height and {"metric", "phase", "p50"} <= set(latency.columns)
        else pl.DataFrame(schema={"phase": pl.String(), "_tpot": pl.Float64()})
    )
    g = g.join(busy, on="phase", how="left").join(tpot, on="phase", how="left")
    # vLLM names only the draft: the target's forward — the verify — is the phase's own step units
    vllm = (pl.col("verify_steps") == 0) & (pl.col("_outside_ns") > 0) & pl.col("_busy").is_not_null()
    g = g.with_columns(
        pl.when(vllm).then(pl.col("_units")).otherwise(pl.col("verify_steps")).alias("verify_steps"),
        pl.when(vllm).then(pl.col("_busy").cast(pl.Int64)).otherwise(pl.col("verify_ns")).alias("verify_ns"),
        (pl.col("_busy") + pl.col("_outside_ns")).alias("_busy"),  # the whole cycle
    )
    share = lambda c: pl.when(pl.col("_busy") > 0).then(pl.col(c) / pl.col("_busy"))  # noqa: E731
    g = g.with_columns(share("verify_ns").alias("verify_share"), share("draft_ns").alias("draft_share"))
    g = g.with_columns(
        (pl.col("_tpot") * pl.col("verify_share")).alias("tpot_verify_ms"),
        (pl.col("_tpot") * pl.col("draft_share")).alias("tpot_draft_ms"),
    )
    return g.select([pl.col(c).cast(t) for c, t in SCHEMA.items()])


def _cycle_phase(regions: pl.DataFrame) -> pl.DataFrame:
    """``regions`` with a draft region outside every phase unit given the phase of the unit that
    started last before it (``_outside`` marks them; see the module docstring)."""
    need = {"is_unit", "start_ns", "phase", "name"}
    if not need <= set(regions.columns):
        return regions
    name = pl.col("name").cast(pl.String)
    top = pl.col("effective_parent_id").is_null() if "effective_parent_id" in regions.columns else pl.lit(True)
    draft = name.str.contains(DRAFT_RE) & ~name.str.contains(VERIFY_RE) & ~pl.col("is_unit").fill_null(False)
    r = regions.with_row_index("_row").with_columns(
        (draft & top & (pl.col("phase").cast(pl.String).fill_null("other") == "other")).alias("_outside")
    )
    if not r["_outside"].any():
        return r.drop("_row")
    units = (
        r.filter(pl.col("is_unit").fill_null(False) & pl.col("start_ns").is_not_null())
        .select(pl.col("start_ns").alias("_us"), pl.col("phase").cast(pl.String).alias("_uphase"))
        .sort("_us")
    )
    out = (
        r.filter(pl.col("_outside") & pl.col("start_ns").is_not_null())
        .select("_row", "start_ns")
        .sort("start_ns")
        .join_asof(units, left_on="start_ns", right_on="_us", strategy="backward")
        .select("_row", "_uphase")
    )
    r = r.join(out, on="_row", how="left").sort("_row")
    return r.with_columns(
        pl.when(pl.col("_uphase").is_not_null()).then(pl.col("_uphase")).otherwise(pl.col("phase")).alias("phase"),
        (pl.col("_outside") & pl.col("_uphase").is_not_null()).alias("_outside"),
    ).drop("_row", "_uphase")
