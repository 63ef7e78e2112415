"""An eager trace as the map of a graphed one (issue 39; docs/analysis.md, "Kernel map").

A graph replay's kernels have names and durations but no ops. A trace of the same model run
eagerly has the same kernels, each launched by an op with its shapes, so priced. Both traces'
steps (phase units) are cut into layers from their kernel sequence (layers.py); a kernel's place
in its step is its **key**: ``(phase, layer, layer kind, position in the layer)`` inside a layer,
its position from the step's start before the first layer, from the step's end after the last.

The map is one step per phase of the eager trace (the last one with the phase's usual layer count:
a warm one); a phase the map lacks is mapped from its phase with as many layers (:func:`map_phases`).
A kernel of the graphed trace without a cost of its own, in a step, takes the cost of the map's
kernel with its key (its op's FLOPs, bytes, name, input shapes, dtype and coverage flag; cost model
``mapped <model>``) when the two kernels' names agree; else, or when the map has no kernel there
(another layer count or layer length), it stays unpriced and is counted. Kernels that shared an op
in the map share one mapped op in each step (a fresh negative id). Memsets and copies are not keyed.

The map's costs are its step's batch: where both steps' names give their token counts (the
engine's step-name grammar) and they differ, the map's op is re-priced at the step's shapes
(:func:`rescaled`), or where its formula refuses them scaled by the token ratio (linear: high for
the weights' bytes, said); where either lacks one the same batch is assumed, and said.
"""

from __future__ import annotations

from typing import Any, Final

import polars as pl

from tracekit.analysis.layers import kernel_layers
from tracekit.analysis.regions.rollup import phase_units
from tracekit.analysis.replay_estimate import step_of
from tracekit.costmodel.ops import op_costs
from tracekit.numbers import count, duration

MAPPED: Final = "mapped"
KEY: Final = ("phase", "section", "layer", "kind", "off")
MAP_COLUMNS: Final = ("cost_op_id", "cost_op_name", "op_flops", "op_bytes", "cost_model", "dtype", "covered", "shape")


def keyed(acts: pl.DataFrame, regions: pl.DataFrame, links: pl.DataFrame) -> pl.DataFrame:
    """Each kernel of a phase unit with its key (module docstring): ``act_id, unit, tokens, name,
    dur_ns`` and :data:`KEY` (``section``: ``layer``, ``head`` or ``tail``)."""
    units = regions.filter(pl.col("region_id").is_in(phase_units(regions).implode())).select("region_id", "phase")
    in_unit = links.select("act_id", "region_id").join(units, on="region_id").unique("act_id", keep="first")
    kl = kernel_layers(acts, in_unit)
    if kl.height == 0:
        return pl.DataFrame()
    tokens = step_of(regions, kl["unit"].unique()).join(
        regions.select(pl.col("region_id").alias("step"), "tokens"), on="step"
    )
    first = pl.col("pos").filter(pl.col("layer").is_not_null()).min().over("unit")
    start = pl.col("pos").min().over("unit", "layer")
    section = (
        pl.when(pl.col("layer").is_not_null())
        .then(pl.lit("layer"))
        .when(first.is_null() | (pl.col("pos") < first))
        .then(pl.lit("head"))
        .otherwise(pl.lit("tail"))
    )
    off = (
        pl.when(pl.col("section") == "layer")
        .then(pl.col("pos") - start)
        .when(pl.col("section") == "head")
        .then(pl.col("pos"))
        .otherwise(pl.col("pos") - pl.len().over("unit"))
    )
    return (
        kl.join(in_unit.select("act_id", "phase"), on="act_id")
        .join(acts.select("act_id", "name"), on="act_id")
        .join(tokens.select(pl.col("region_id").alias("unit"), "tokens"), on="unit", how="left")
        .with_columns(section.alias("section"), pl.col("layer").fill_null(-1), pl.col("kind").fill_null(0))
        .with_columns(off.alias("off"))
        .select("act_id", "unit", "tokens", "name", "dur_ns", *KEY)
    )


def map_table(acts: pl.DataFrame, regions: pl.DataFrame, links: pl.DataFrame, costs: pl.DataFrame) -> pl.DataFrame:
    """The map from an eager trace (its costed activities: regions/metrics.with_costs; its ops'
    costs for the shapes): per phase its last step with the phase's usual layer count, one row per
    kernel: :data:`KEY`, ``name``, ``map_tokens`` and :data:`MAP_COLUMNS`; ``layers`` that step's
    layer count."""
    k = keyed(acts, regions, links)
    if k.height == 0:
        return pl.DataFrame()
    per = k.group_by("phase", "unit").agg((pl.col("layer").max() + 1).alias("layers"))
    usual = per.group_by("phase").agg(pl.col("layers").mode().min().alias("layers"))
    chosen = (
        per.join(usual, on=["phase", "layers"]).group_by("phase").agg(pl.col("unit").max(), pl.col("layers").first())
    )
    op = [c for c in ("input_types", "concrete_inputs") if c in costs.columns]
    shapes = costs.select(pl.col("op_id").alias("cost_op_id"), pl.col("input_dims").alias("shape"), *op)
    return (
        k.join(chosen, on=["phase", "unit"])
        .join(acts.select("act_id", *MAP_COLUMNS[:-1]), on="act_id")
        .join(shapes, on="cost_op_id", how="left")
        .select(*KEY, "name", pl.col("tokens").alias("map_tokens"), "layers", *MAP_COLUMNS, *op)
    )


def rescaled(agree: pl.DataFrame) -> pl.DataFrame:
    """(``cost_op_id, tokens, _rf, _rb, _rshape``): the map's ops whose step's token count differs
    from the mapped step's, re-priced (costmodel/ops.py) with every tensor's leading dim that equals
    the map's token count set to the step's; null where the formula refuses the new shapes."""
    none = pl.DataFrame(schema={"cost_op_id": pl.Int64, "tokens": pl.Int64, "_rf": pl.Float64,
                                "_rb": pl.Float64, "_rshape": pl.String})  # fmt: skip
    if "shape" not in agree.columns or not {"input_types", "concrete_inputs"} <= set(agree.columns):
        return none
    want = agree.filter(
        pl.col("cost_op_id").is_not_null() & pl.col("shape").is_not_null() & (pl.col("tokens") != pl.col("map_tokens"))
    ).unique(["cost_op_id", "tokens"])
    if want.height == 0:
        return none
    parts = []
    for (old, new), g in want.group_by("map_tokens", "tokens"):  # one per pair of batch sizes
        lead = pl.col("shape").str.replace_all(rf"([\[,]\s*)\[\s*{int(old)}(\s*[,\]])", f"${{1}}[{int(new)}${{2}}")
        parts.append(g.with_columns(lead.alias("shape")))
    ops = pl.concat(parts).select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("op_id"),
        pl.lit(None, pl.Int64).alias("parent_id"),
        pl.col("cost_op_name").alias("name"),
        pl.col("shape").alias("input_dims"),
        "input_types",
        "concrete_inputs",
        "cost_op_id",
        "tokens",
    )
    return op_costs(ops).select(
        "cost_op_id",
        "tokens",
        pl.col("flops").alias("_rf"),
        pl.col("bytes").alias("_rb"),
        pl.col("input_dims").alias("_rshape"),
    )


def map_costs(
    acts: pl.DataFrame, regions: pl.DataFrame, links: pl.DataFrame, table: pl.DataFrame, source: str
) -> tuple[pl.DataFrame, pl.DataFrame | None, dict[str, Any], list[str]]:
    """``acts`` with the map's costs on the kernels without their own (module docstring), the
    mapped ops' shapes (``op_id, input_dims``: the shape roofline's), the summary
    (``totals.mapped``: kernels and device time mapped and not, coverage, why) and the warnings."""
    k = keyed(acts, regions, links)
    if k.height == 0 or table.height == 0:
        why = "the map trace has no step with kernels" if table.height == 0 else "this trace has no step with kernels"
        return acts, None, {"source": source, "coverage": 0.0, "why_none": why}, [f"--map: nothing mapped: {why}"]
    todo = k.join(acts.filter(pl.col("cost_op_id").is_null()), on="act_id", how="semi")  # no cost of their own
    phases = map_phases(k, table)
    hit = todo.join(phases.select("phase", "map_phase"), on="phase", how="left").join(
        table.rename({"name": "map_name", "phase": "map_phase"}), on=["map_phase", *KEY[1:]], how="left"
    )
    agree = hit.filter(pl.col("map_name") == pl.col("name"))
    agree = agree.join(rescaled(agree), on=["cost_op_id", "tokens"], how="left")
    scale = (pl.col("tokens") / pl.col("map_tokens")).fill_null(1.0)
    grp = pl.struct("unit", pl.col("cost_op_id").alias("_o"))
    new = agree.filter(pl.col("cost_op_id").is_not_null()).select(
        "act_id",
        (-1 - pl.col("act_id").min().over(grp)).alias("_cost_op_id"),
        pl.col("cost_op_name").alias("_cost_op_name"),
        pl.coalesce("_rf", pl.col("op_flops") * scale).alias("_op_flops"),
        pl.coalesce("_rb", pl.col("op_bytes") * scale).alias("_op_bytes"),
        (pl.lit(MAPPED + " ") + pl.col("cost_model").fill_null("op")).alias("_cost_model"),
        pl.col("dtype").alias("_dtype"),
        pl.coalesce("_rshape", "shape").alias("_shape"),
    )
    shapes = new.select(pl.col("_cost_op_id").alias("op_id"), pl.col("_shape").alias("input_dims")).unique("op_id")
    out = acts.join(new.drop("_shape"), on="act_id", how="left", maintain_order="left")
    m = pl.col("_cost_op_id").is_not_null()
    out = out.with_columns(
        *(pl.when(m).then(pl.col(f"_{c}")).otherwise(pl.col(c)).alias(c) for c in _MAPPED),
        (m | pl.col("act_id").is_in(agree.filter(pl.col("covered"))["act_id"].implode()) | pl.col("covered")).alias(
            "covered"
        ),
    ).drop(*(f"_{c}" for c in _MAPPED))
    summary = _summary(k, todo, hit, agree, phases, source)
    return out, shapes, summary, _warnings(summary)


# the columns a mapped kernel takes from its counterpart in the map (as ``_<column>`` until then)
_MAPPED = ("cost_op_id", "cost_op_name", "op_flops", "op_bytes", "cost_model", "dtype")


def map_phases(k: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """(``phase, trace, map_phase, map``): for each phase of the trace the map's phase whose step maps
    it — the same phase, else one with the same layer count (a prefill map for decode steps: names
    are checked and the costs re-priced at the step's tokens all the same) — and both layer counts."""
    got = k.filter(pl.col("section") == "layer").group_by("phase", "unit").agg((pl.col("layer").max() + 1).alias("n"))
    mine = (
        k.select("phase")
        .unique()
        .join(got.group_by("phase").agg(pl.col("n").mode().min().alias("trace")), on="phase", how="left")
    )
    theirs = table.group_by("phase").agg(pl.col("layers").first().alias("map")).rename({"phase": "map_phase"})
    score = (pl.col("phase") == pl.col("map_phase")).cast(pl.Int8) * 2 + (pl.col("trace") == pl.col("map")).fill_null(
        False
    ).cast(pl.Int8)
    return (
        mine.join(theirs, how="cross")
        .sort(score, "map_phase", descending=[True, False])
        .unique("phase", keep="first")
        .sort("phase")
    )


def _summary(
    k: pl.DataFrame, todo: pl.DataFrame, hit: pl.DataFrame, agree: pl.DataFrame, phases: pl.DataFrame, source: str
) -> dict[str, Any]:
    total = int(k["dur_ns"].sum() or 0)
    ns = int(agree["dur_ns"].sum() or 0)
    other = hit.filter(pl.col("map_name").is_not_null() & (pl.col("map_name") != pl.col("name")))
    none = hit.filter(pl.col("map_name").is_null())
    priced = agree.filter(pl.col("cost_op_id").is_not_null())
    same = priced.filter(pl.col("tokens").is_null() | pl.col("map_tokens").is_null())
    other_batch = priced.filter(pl.col("tokens") != pl.col("map_tokens"))
    repriced = other_batch.filter(pl.col("_rf").is_not_null())
    return {
        "source": source,
        "coverage": ns / total if total else None,
        "mapped_kernels": agree.height,
        "mapped_ns": ns,
        "priced_kernels": priced.height,
        "own_cost_kernels": k.height - todo.height,
        "unmapped_kernels": todo.height - agree.height,
        "unmapped_ns": int(todo["dur_ns"].sum() or 0) - ns,
        "name_differs": {"kernels": other.height, "ns": int(other["dur_ns"].sum() or 0)},
        "no_counterpart": {"kernels": none.height, "ns": int(none["dur_ns"].sum() or 0)},
        "layers": phases.to_dicts(),
        "batch_assumed_kernels": same.height,
        "repriced_kernels": repriced.height,
        "scaled_kernels": other_batch.height - repriced.height,
    }


def _warnings(s: dict[str, Any]) -> list[str]:
    """What the summary says that the numbers need beside them."""
    out = []
    if s["unmapped_kernels"]:
        out.append(
            f"--map: {count(s['unmapped_kernels'], 'kernel')} ({duration(s['unmapped_ns'])}) without a cost of "
            f"their own could not be mapped: {s['name_differs']['kernels']} where the map's kernel name differs, "
            f"{s['no_counterpart']['kernels']} with no kernel at that place in the map"
        )
    for r in s["layers"]:
        if r["map_phase"] != r["phase"]:
            out.append(f"--map: the map has no {r['phase']} step: its {r['map_phase']} step maps them")
        if r["trace"] != r["map"]:
            here, there = (f"{n} layers" if n is not None else "no layers" for n in (r["trace"], r["map"]))
            out.append(f"--map: {r['phase']} steps have {here} here but the map's {r['map_phase']} step {there}")
    if s["batch_assumed_kernels"]:
        out.append("--map: a step name without its token count: the map's batch is assumed for its mapped costs")
    if s["scaled_kernels"]:
        out.append(
            f"--map: {count(s['scaled_kernels'], 'kernel')}' mapped costs scaled by the token ratio (their ops "
            "refuse the scaled shapes; linear: the weights' bytes are over-scaled)"
        )
    return out
