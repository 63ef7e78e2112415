"""Layers from the kernel sequence (issue 39; docs/analysis.md, "Layers"): which layer of the model
each kernel of a step belongs to, without an op, a module or a capture trace.

A transformer's forward pass repeats one block of kernels per layer, and every block holds one run
of attention kernels. Within each phase unit (one forward step, graph replay or eager), on its
kernels in start order:

- **Anchors**: the start of every run of attention-class kernels (kernel_classes.py) whose first
  kernel's name starts another run of the step too (a one-off planning kernel is no layer). The layers'
  usual length ``g`` is the most common distance between two anchors; anchors whose distance to a
  neighbour is within :data:`GAP_TOLERANCE` of ``g`` are layers, the others (an attention-class
  kernel outside the layers: a planning or cache kernel) are not. Alternating layer kinds (full and
  sliding attention, dense and MoE layers) differ by a few kernels and stay within the tolerance.
- **Start**: a layer starts at its input norm — the last norm-class kernel before its anchor (the
  median distance over the step's layers); without one, at the anchor. A layer ends where the
  next starts; the last one ``g`` kernels after its start. Kernels before the first layer and after
  the last (embedding, final norm, LM head, sampling) belong to none.
- **Role** of a kernel in its layer: ``norm`` and ``communication`` by class; the other kernels up
  to the layer's next norm after its anchor, or up to its output projection (the first GEMM after
  the anchor) when that comes first, are ``attention`` (projections, rotary, attention), the rest
  ``mlp`` (the MLP or the MoE, its routing included).

Fewer than :data:`MIN_LAYERS` anchors in a step: no layers there, and the summary says why.
"""

from __future__ import annotations

import warnings
from typing import Any

import polars as pl

from tracekit.analysis.regions.kernel_classes import op_class
from tracekit.numbers import count
from tracekit.tables.cases import first

MIN_LAYERS = 4
GAP_TOLERANCE = 0.25  # an anchor is a layer's when its distance to a neighbour is within 25 % of the usual
OUTLIER = 1.5  # a layer's role taking this many times the median of its kind's layers is named
ROLES = ("attention", "mlp", "norm", "communication")


def kernel_layers(activities: pl.DataFrame, in_unit: pl.DataFrame) -> pl.DataFrame:
    with warnings.catch_warnings():  # the as-of joins are on frames sorted by (unit, key) just before
        warnings.filterwarnings("ignore", "Sortedness of columns cannot be checked", UserWarning)
        return _kernel_layers(activities, in_unit)


def _kernel_layers(activities: pl.DataFrame, in_unit: pl.DataFrame) -> pl.DataFrame:
    """Each kernel of a phase unit with its ``unit`` (region id), ``pos`` in the unit, ``layer``
    (0-based, null outside the layers), ``kind`` (its layer's kernel count: the layer's kind) and
    ``role`` (:data:`ROLES`, null outside the layers); ``dur_ns`` its device time."""
    k = (
        activities.filter(pl.col("kind") == "kernel")
        .select("act_id", "name", "start_ns", (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
        .join(in_unit.select("act_id", pl.col("region_id").alias("unit")), on="act_id")
        .sort("unit", "start_ns", "act_id")
        .with_columns(pl.int_range(pl.len()).over("unit").alias("pos"), op_class(pl.col("name")).alias("cls"))
    )
    attn = pl.col("cls") == "attention"
    # a run whose first kernel's name starts no other run of the step is a one-off (a planning or
    # index kernel of the attention class, e.g. create_flashinfer_kv_indices), not a layer's
    anchors = (
        k.filter(attn & ~attn.shift(1).over("unit").fill_null(False))
        .filter(pl.len().over("unit", "name") >= 2)
        .select("unit", "pos")
    )
    gaps = anchors.with_columns(
        pl.col("pos").diff().over("unit").alias("before"), (-pl.col("pos").diff(-1)).over("unit").alias("after")
    )
    usual = gaps.group_by("unit").agg(pl.col("before").drop_nulls().mode().min().alias("g"))
    near = (pl.col("before") - pl.col("g")).abs() <= GAP_TOLERANCE * pl.col("g")
    near_next = (pl.col("after") - pl.col("g")).abs() <= GAP_TOLERANCE * pl.col("g")
    kept = (
        gaps.join(usual, on="unit")
        .filter(near.fill_null(False) | near_next.fill_null(False))
        .filter(pl.len().over("unit") >= MIN_LAYERS)
        .sort("unit", "pos")
    )
    norms = k.filter(pl.col("cls") == "norm").select("unit", pl.col("pos").alias("norm_pos"))
    back = kept.join_asof(norms.sort("unit", "norm_pos"), left_on="pos", right_on="norm_pos", by="unit")
    lead = pl.when((pl.col("pos") - pl.col("norm_pos")) < pl.col("g")).then(pl.col("pos") - pl.col("norm_pos"))
    starts = (
        back.with_columns(lead.fill_null(0).median().over("unit").cast(pl.Int64).alias("lead"))
        .with_columns(
            (pl.col("pos") - pl.col("lead")).alias("start"),
            pl.int_range(pl.len()).over("unit").alias("layer"),
        )
        .with_columns(pl.col("start").shift(-1).over("unit").fill_null(pl.col("start") + pl.col("g")).alias("end"))
        .drop("norm_pos")
    )
    # where the attention block ends and the MLP begins: the layer's next norm after its anchor, or
    # just after the output projection (the first GEMM after the anchor) when that comes first or no
    # kernel is of the norm class (eager RMSNorm is a few elementwise kernels)
    gemms = k.filter(pl.col("cls") == "gemm").select("unit", pl.col("pos").alias("gemm_pos"))
    fwd = {"by": "unit", "strategy": "forward"}
    after = (
        starts.sort("unit", "pos")
        .with_columns((pl.col("pos") + 1).alias("next"))
        .join_asof(norms.sort("unit", "norm_pos"), left_on="pos", right_on="norm_pos", **fwd)  # type: ignore[arg-type]
        .join_asof(gemms.sort("unit", "gemm_pos"), left_on="next", right_on="gemm_pos", **fwd)  # type: ignore[arg-type]
        .select("unit", "layer", pl.min_horizontal("norm_pos", pl.col("gemm_pos") + 1).alias("mlp_from"))
    )
    spans = starts.join(after, on=["unit", "layer"]).select("unit", "layer", "start", "end", "mlp_from")
    out = k.sort("unit", "pos").join_asof(
        spans.sort("unit", "start"), left_on="pos", right_on="start", by="unit", strategy="backward"
    )
    inside = pl.col("layer").is_not_null() & (pl.col("pos") < pl.col("end"))
    role = first(
        (~inside, pl.lit(None)),
        (pl.col("cls").is_in(["norm", "communication"]), pl.col("cls")),
        (pl.col("mlp_from").is_null() | (pl.col("pos") < pl.col("mlp_from")), pl.lit("attention")),
        otherwise=pl.lit("mlp"),
    )
    return out.select(
        "act_id",
        "unit",
        "pos",
        "dur_ns",
        pl.when(inside).then(pl.col("layer")).alias("layer"),
        pl.when(inside).then(pl.col("end") - pl.col("start")).alias("kind"),
        role.alias("role"),
    )


def layer_summary(kl: pl.DataFrame, model: dict[str, Any] | None = None) -> dict[str, Any]:
    """The layers of the trace's steps: ``count`` (the steps' usual layer count), ``coverage`` (share
    of the steps' kernel time in a layer), ``per_layer`` (time per layer and role over every step),
    ``outliers`` (a layer's role at :data:`OUTLIER` × the median of its kind or more, in words),
    ``model_layers`` and ``why_none``."""
    total = int(kl["dur_ns"].sum() or 0) if kl.height else 0
    per_unit = kl.filter(pl.col("layer").is_not_null()).group_by("unit").agg(pl.col("layer").max() + 1)
    if per_unit.height == 0:
        why = (
            "no phase unit (forward step) to find layers in"
            if kl.height == 0
            else f"no step holds {MIN_LAYERS} or more evenly spaced attention kernel runs"
        )
        return {"count": None, "why_none": why}
    n = int(per_unit["layer"].mode().min())  # type: ignore[arg-type]
    inl = kl.filter(pl.col("layer").is_not_null())
    per = (
        inl.group_by("layer")
        .agg(
            pl.col("kind").mode().min().alias("kind"),
            pl.len().alias("kernels"),
            pl.col("dur_ns").sum().alias("time_ns"),
            *[pl.col("dur_ns").filter(pl.col("role") == r).sum().alias(f"{r}_ns") for r in ROLES],
        )
        .sort("layer")
    )
    out: dict[str, Any] = {
        "count": n,
        "steps": per_unit.height,
        "coverage": float(inl["dur_ns"].sum()) / total if total else None,
        "per_layer": per.drop("kind").to_dicts(),
        "outliers": outliers(per),
    }
    want = (model or {}).get("num_hidden_layers")
    if isinstance(want, int):
        out["model_layers"] = want
    return out


def outliers(per: pl.DataFrame) -> list[str]:
    """``layer 17 attention 2.1× the median`` for each layer's role whose time is :data:`OUTLIER` ×
    the median of the same role over the layers of its kind (the same kernel count) or more."""
    words = []
    for r in ROLES:
        med = pl.col(f"{r}_ns").median().over("kind")
        hit = per.with_columns((pl.col(f"{r}_ns") / med).alias("x")).filter(
            (med > 0) & (pl.col("x") >= OUTLIER) & (pl.len().over("kind") >= MIN_LAYERS)
        )
        words += [f"layer {row['layer']} {r} {row['x']:.1f}× the median" for row in hit.iter_rows(named=True)]
    return words


def model_warning(summary: dict[str, Any]) -> str | None:
    """A warning when the layers found in the steps differ from the model config's layer count."""
    want, got = summary.get("model_layers"), summary.get("count")
    if want is None or got is None or want == got:
        return None
    return (
        f"{count(got, 'layer')} found in the steps' kernel sequence, but the model config has "
        f"num_hidden_layers {want}: the layer view may split or merge layers"
    )
