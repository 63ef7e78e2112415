"""Per-class roofline: for each op class of each scope (trace, phase, region) and for the top ops
by (name, shape): FLOPs, bytes, achieved rates, % of the attainable roof at the row's own
intensity and dtype, a verdict and an ``underused`` flag (docs/analysis.md, "Per-class roofline").

An op's FLOPs and bytes go to the kernels that do its work: for a GEMM-like cost (GEMM, linear,
conv, fused MoE) its gemm-class kernels, for an attention cost its attention-class kernels, shared
in proportion to their device time; its other kernels (MoE routing, top-k, sort, quantize,
finalize, a bias add or split-K reduce) carry none of it and are not covered, so their class
rows hold only work priced on its own (else "–"). An op with no kernel of its work's class, and
every other op, shares its cost over all its kernels by device time. The class sums add up to the
op totals either way. Attainable = min(peak FLOP/s(dtype), intensity ×
bandwidth); on the bandwidth side (intensity < ridge) the % of roof is achieved B/s ÷ bandwidth,
on the compute side achieved FLOP/s ÷ peak — the same number, defined also for work without FLOPs
(copies). Rates divide by the summed device time of the covered activities of the row. A row above
its roof (``frac_roof > 1``) is flagged ``above_roof``: the peaks are too low, not the kernels fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analysis.regions.kernel_classes import CLASS_ORDER, MEMCPY, op_class
from tracekit.conventions import ABOVE_ROOF_COLUMN
from tracekit.analysis.verdict import Thresholds, above_roof_expr, fmt_dur, fmt_pct, peaks_frame, ratio
from tracekit.analysis.roofline.exact_sums import FLOAT_SUMS, agg_sum, frac_bits, to_float
from tracekit.analysis.regions.tops import leaf_phase, region_closure
from tracekit.tables.cases import first
from tracekit.tables.gather import take
from tracekit.analysis.regions.metrics import positions

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware

SMALL_KERNEL_NS = 10_000  # a median kernel shorter than this cannot fill the device ("kernels too small")
TOP_SHAPES = 10


def _scope_rows(
    pre: pl.LazyFrame,
    closure: pl.LazyFrame,
    leaf_phase: pl.LazyFrame,
    keys: list[str],
    sums: list[str],
    bits: dict[str, int | None],
) -> pl.LazyFrame:
    """Partial sums per (leaf region, ``keys``) → per (scope_kind, scope, ``keys``)."""
    leaf = pre.rename({"region_id": "_leaf"})
    parts = [
        leaf.with_columns(pl.lit("trace").alias("scope_kind"), pl.lit("trace").alias("scope")),
        leaf.join(leaf_phase, on="_leaf", nulls_equal=True).with_columns(pl.lit("phase").alias("scope_kind")),
        leaf.join(closure, on="_leaf", nulls_equal=True)
        .with_columns(pl.lit("region").alias("scope_kind"), pl.col("region_id").cast(pl.String()).alias("scope"))
        .drop("region_id"),
    ]
    return (
        pl.concat(parts, how="diagonal_relaxed")
        .drop("_leaf")
        .group_by("scope_kind", "scope", *keys)
        .agg([pl.col(c).sum() for c in sums])
        .with_columns(to_float(sums, bits))
    )


def _verdicts(df: pl.LazyFrame, hardware: Hardware | None, th: Thresholds) -> pl.LazyFrame:
    """Rates, attainable roof, % of roof, verdict, ``underused`` (+ its cause in words) and
    ``above_roof_cause``; a step of the caller's lazy plan."""
    t = pl.col("covered_time_ns").cast(pl.Float64())
    df = (
        df.with_columns(
            pl.when(pl.col("flops_known")).then(pl.col("flops")).alias("flops"),
            pl.when(pl.col("bytes_known")).then(pl.col("bytes")).alias("bytes"),
        )
        .with_columns(
            pl.when(pl.col("bytes") > 0).then(ratio(pl.col("flops"), pl.col("bytes"))).alias("intensity"),
            pl.when(t > 0).then(ratio(pl.col("flops"), t * 1e-9)).alias("achieved_flops_per_s"),
            pl.when(t > 0).then(ratio(pl.col("bytes"), t * 1e-9)).alias("achieved_bytes_per_s"),
            pl.when(pl.col("device_time_ns") > 0).then(t / pl.col("device_time_ns")).otherwise(0.0).alias("coverage"),
        )
        .join(peaks_frame(hardware).lazy(), on="dtype", how="left")
    )
    bw = (
        float(hardware.mem_bandwidth_bytes_per_s)
        if hardware is not None and hardware.mem_bandwidth_bytes_per_s
        else None
    )
    # work without FLOPs (copies) sits on the bandwidth roof whatever its dtype
    no_flops = (pl.col("flops") == 0) & (pl.col("bytes") > 0) & pl.lit(bw is not None)
    if bw is not None:
        df = df.with_columns(pl.col("peak_bytes_per_s").fill_null(bw))
    compute = (pl.col("intensity") >= pl.col("ridge")).fill_null(False)
    df = df.with_columns(
        pl.min_horizontal(pl.col("peak_flops_per_s"), pl.col("intensity") * pl.col("peak_bytes_per_s")).alias(
            "attainable_flops_per_s"
        ),
        pl.when(compute)  # null where a rate or a peak is 0 or the quotient overflows
        .then(ratio(pl.col("achieved_flops_per_s"), pl.col("peak_flops_per_s")))
        .otherwise(ratio(pl.col("achieved_bytes_per_s"), pl.col("peak_bytes_per_s")))
        .alias("frac_roof"),
    )
    unknown = (
        (pl.col("coverage") < th.min_coverage)
        | pl.col("intensity").is_null()
        | (pl.col("ridge").is_null() & ~no_flops.fill_null(False))
    )
    bound = (
        pl.when(unknown).then(pl.lit("unknown")).when(compute).then(pl.lit("compute")).otherwise(pl.lit("bandwidth"))
    )
    under = (~unknown & (pl.col("frac_roof") < th.underused_frac_roof)).fill_null(False)
    typical = pl.coalesce("kernel_median_ns", "kernel_mean_ns")
    what = pl.when(pl.col("kernel_median_ns").is_not_null()).then(pl.lit("median")).otherwise(pl.lit("mean"))
    cause = (
        pl.when(typical < SMALL_KERNEL_NS)
        .then(pl.format("kernels too small ({} kernel {})", what, fmt_dur(typical)))
        .otherwise(pl.format("low occupancy or inefficient kernels ({} kernel {})", what, fmt_dur(typical)))
    )
    tf32 = hardware.peak_flops_per_s.get("tf32") if hardware is not None else None
    return df.with_columns(
        bound.alias("bound"),
        under.alias("underused"),
        pl.when(under).then(cause).alias("underused_cause"),
        above_roof_expr(("frac_roof",)).alias(ABOVE_ROOF_COLUMN),
    ).with_columns(above_roof_cause(tf32).alias("above_roof_cause"))


COST_OVERCOUNT = "cost overcount"
CEILING_TOO_LOW = "ceiling too low"


def above_roof_cause(tf32_peak: float | None = None, keys: tuple[str, ...] = ("scope_kind", "scope")) -> pl.Expr:
    """Why a row is above its roof (null when it is not): ``ceiling too low`` when the work of the
    rest of its scope (every other row's FLOPs or bytes over their covered time; the row's own when
    it is the whole scope) is above this row's roof too, on the row's side of the ridge: other
    work runs that fast as well, so the peak is wrong;
    or when fp32 work on the compute side runs above the fp32 peak but within ``tf32_peak`` (fp32
    matmuls on TF32 tensor cores, ``cutlass_80_tensorop_s1688gemm``: their ceiling is TF32's);
    else ``cost overcount``: the rest of the scope is below the roof, so this row's priced FLOPs or
    bytes are more than its kernels did (whole-model sizes on one rank, an ``out=`` buffer counted
    as an input, a table counted whole)."""
    # the rest of the scope (every other row), or the whole scope when the row is all of it
    own_t = pl.col("covered_time_ns").cast(pl.Float64())
    t_all = own_t.sum().over(*keys)
    rest = t_all - own_t > 0
    t = pl.when(rest).then(t_all - own_t).otherwise(t_all) * 1e-9
    f, b = pl.col("flops").fill_null(0.0), pl.col("bytes").fill_null(0.0)
    flops = pl.when(rest).then(f.sum().over(*keys) - f).otherwise(f.sum().over(*keys))
    nbytes = pl.when(rest).then(b.sum().over(*keys) - b).otherwise(b.sum().over(*keys))
    compute = (pl.col("intensity") >= pl.col("ridge")).fill_null(False)
    whole = (
        pl.when(compute)
        .then(ratio(flops, t * pl.col("peak_flops_per_s")))
        .otherwise(ratio(nbytes, t * pl.col("peak_bytes_per_s")))
    )
    above = pl.col(ABOVE_ROOF_COLUMN).fill_null(False)
    tf32 = (
        compute & (pl.col("dtype") == "fp32") & (pl.col("achieved_flops_per_s") <= tf32_peak)
        if tf32_peak
        else pl.lit(False)
    )
    return first(
        (above & ((whole > 1.0).fill_null(True) | tf32.fill_null(False)), pl.lit(CEILING_TOO_LOW)),
        (above, pl.lit(COST_OVERCOUNT)),
        otherwise=pl.lit(None, dtype=pl.String()),
    )


def prepare(acts: pl.DataFrame) -> pl.DataFrame:
    """Per activity: class, its share of its cost owner's FLOPs / bytes, covered device time.
    Copies and sets (memcpy/memset activities) take no share of their op's cost: their work is
    the bytes they moved (``copy_bytes``, from the kernels table, when the analysis has it)."""
    cb = pl.col("copy_bytes").cast(pl.Float64()) if "copy_bytes" in acts.columns else pl.lit(None, dtype=pl.Float64())
    cm = pl.col("cost_model").cast(pl.String()) if "cost_model" in acts.columns else pl.lit(None, dtype=pl.String())
    a = acts.lazy().select(
        "region_id",
        "dur_ns",
        "covered",
        "cost_op_id",
        "op_flops",
        "op_bytes",
        "dtype",
        cb.alias("_cb"),
        work_class(cm).alias("_work"),
        "cost_op_name",
        "name",
        "kind",
    )
    # the name rules run once per distinct name, not per activity (names average ~400 bytes); the
    # classes are mapped onto the rows as one column (a join on (name, kind) gathered a copy of all
    # the other columns too: ~60 MB more at this step's peak on the 860 MB replica)
    cls = _classes(a)
    copy = pl.col("op_class") == MEMCPY
    # the kernels doing the op's work: those of its work's class when it launched any, else all
    doer = pl.col("op_class") == pl.col("_work")
    any_doer = doer.fill_null(False).any().over("cost_op_id")
    helper = ~copy & pl.col("_work").is_not_null() & any_doer & ~doer.fill_null(False)
    # the expressions below read the helper flag as a column (``_helper``): a window inside
    # another window's sum is evaluated once per group (an op per kernel: 332,600 ops took 17 s)
    shares = ~copy & ~pl.col("_helper")
    d = pl.when(shares).then(pl.col("dur_ns")).otherwise(0)
    tot = d.sum().over("cost_op_id")
    n = shares.cast(pl.Int64()).sum().over("cost_op_id")
    share = pl.when(~shares).then(0.0).when(tot > 0).then(pl.col("dur_ns") / tot).otherwise(1.0 / n)
    cov = (
        pl.when(copy)
        .then(pl.col("_cb").is_not_null())
        .otherwise(pl.col("covered").fill_null(False) & pl.col("cost_op_id").is_not_null() & ~pl.col("_helper"))
    )
    return (
        a.with_columns(cls.alias("op_class"))
        .drop("name", "kind")
        .with_columns(helper.alias("_helper"))
        .with_columns(
            pl.when(copy).then(0.0).otherwise(pl.col("op_flops") * share).alias("flops"),
            pl.when(copy).then(pl.col("_cb")).otherwise(pl.col("op_bytes") * share).alias("bytes"),
            pl.when(cov).then(pl.col("dur_ns")).otherwise(0).alias("covered_time_ns"),
            *(
                pl.when(copy)
                .then(pl.col("_cb").is_not_null())
                .otherwise(pl.col(f"op_{k}").is_not_null() & ~pl.col("_helper"))
                .alias(f"{k}_known")
                for k in ("flops", "bytes")
            ),
            pl.when(copy | pl.col("_helper"))
            .then(pl.lit(None, dtype=pl.String()))
            .otherwise(pl.col("dtype"))
            .alias("dtype"),
        )
        .drop("_cb", "_work", "_helper")
        .collect(engine="in-memory")
    )


# cost models whose work runs in one kernel class: a fused op's other kernels are its helpers
_WORK_CLASSES: dict[str, str] = {
    **dict.fromkeys(
        (
            "gemm",
            "gemm_bias",
            "bgemm",
            "bgemm_bias",
            "matmul",
            "linear",
            "linear_bias",
            "scaled_gemm",
            "fused_moe",
            "conv",
        ),
        "gemm",
    ),
    **dict.fromkeys(
        ("sdpa", "sdpa_causal", "varlen_attention", "varlen_attention_causal", "paged_attention"), "attention"
    ),
}


def work_class(cost_model: pl.Expr) -> pl.Expr:
    """The kernel class that does the work of an op priced by ``cost_model`` (gemm for GEMM,
    linear, conv and fused MoE costs, attention for attention costs), null for other models."""
    return cost_model.replace_strict(
        list(_WORK_CLASSES), list(_WORK_CLASSES.values()), default=None, return_dtype=pl.String()
    )


def _classes(a: pl.DataFrame | pl.LazyFrame) -> pl.Expr:
    """``op_class(name, kind)`` of each row of ``a``: memcpy/memset by kind, else the name rules,
    evaluated for the distinct names only (a null name matches no rule: ``other``)."""
    rules = (
        a.lazy()
        .select(pl.col("name").drop_nulls().unique())
        .with_columns(op_class(pl.col("name"), pl.lit(None, dtype=pl.String())).alias("c"))
        .collect(engine="in-memory")
    )
    by_name = pl.col("name").replace_strict(
        rules["name"], rules["c"], default=pl.lit("other"), return_dtype=pl.String()
    )
    copy = pl.col("kind").is_in(["memcpy", "memset"]).fill_null(False)
    return pl.when(copy).then(pl.lit(MEMCPY)).otherwise(by_name)


def class_roofline(
    acts: pl.DataFrame,
    regions: pl.DataFrame,
    unit_ph: pl.DataFrame,
    hardware: Hardware | None,
    th: Thresholds,
    prep: pl.DataFrame | None = None,
    closure: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per (scope_kind, scope, op_class): ``count, device_time_ns, share`` (of the scope's
    device time), ``covered_time_ns, flops, bytes, intensity, dtype, achieved_flops_per_s,
    achieved_bytes_per_s, coverage, peak_flops_per_s, peak_bytes_per_s, ridge,
    attainable_flops_per_s, frac_roof, bound, underused, underused_cause, kernel_median_ns`` (phase
    and trace scopes) / ``kernel_mean_ns`` (every scope). ``prep``: :func:`prepare` of ``acts``,
    ``closure``: :func:`~tracekit.analysis.regions.tops.region_closure` of ``regions`` and ``acts``, when
    the caller has them. One lazy plan, collected once."""
    prep = prepare(acts) if prep is None else prep
    bits = frac_bits(prep)
    a = prep.lazy()
    closure = region_closure(regions, acts) if closure is None else closure
    cl = closure.lazy()
    leaf_phase = _leaf_phase(closure, unit_ph)
    sums = ["count", "device_time_ns", "covered_time_ns", "flops", "bytes", "flops_known", "bytes_known"]
    pre = a.group_by("region_id", "op_class").agg(_work_sums(pl.len(), bits))
    rows = _scope_rows(pre, cl, leaf_phase, ["op_class"], sums, bits)
    rows = rows.with_columns(pl.col("flops_known") > 0, pl.col("bytes_known") > 0)
    dt = _dominant_dtype(a, cl, leaf_phase, bits)
    med = _median_kernel(a, leaf_phase)
    keys = ["scope_kind", "scope", "op_class"]
    rows = (
        rows.join(dt, on=keys, how="left")
        .join(med, on=keys, how="left")
        .with_columns(
            (pl.col("device_time_ns") / pl.col("count")).alias("kernel_mean_ns"),
            ratio(pl.col("device_time_ns"), pl.col("device_time_ns").sum().over("scope_kind", "scope")).alias("share"),
        )
    )
    out = _verdicts(rows, hardware, th)
    rank = pl.col("op_class").replace_strict(list(CLASS_ORDER), list(range(len(CLASS_ORDER))), return_dtype=pl.Int64())
    kind_rank = pl.col("scope_kind").replace_strict(["trace", "phase", "region"], [0, 1, 2], return_dtype=pl.Int64())
    return out.sort(kind_rank, "scope", rank).drop("flops_known", "bytes_known").collect(engine="in-memory")


def _dominant_dtype(
    a: pl.LazyFrame, cl: pl.LazyFrame, leaf_phase: pl.LazyFrame, bits: dict[str, int | None]
) -> pl.LazyFrame:
    """The dominant dtype of each (scope, class) row: the covered dtype with most time, floating point first."""
    dt = (
        a.filter(pl.col("covered_time_ns") > 0)
        .group_by("region_id", "op_class", "dtype")
        .agg(pl.col("covered_time_ns").sum())
    )
    dt = _scope_rows(dt, cl, leaf_phase, ["op_class", "dtype"], ["covered_time_ns"], bits)
    return (
        dt.drop_nulls("dtype")
        .with_columns(pl.col("dtype").str.contains(r"^(fp|bf|tf)").alias("_f"))
        .sort(
            ["scope_kind", "scope", "op_class", "_f", "covered_time_ns", "dtype"],
            descending=[False, False, False, True, True, False],
        )
        .unique(["scope_kind", "scope", "op_class"], keep="first")
        .select("scope_kind", "scope", "op_class", "dtype")
    )


def _median_kernel(a: pl.LazyFrame, leaf_phase: pl.LazyFrame) -> pl.LazyFrame:
    """The median kernel time of each class for the trace and each phase (regions get the mean)."""
    ph = a.select("region_id", "op_class", "dur_ns").join(
        leaf_phase.rename({"_leaf": "region_id"}), on="region_id", how="left", nulls_equal=True
    )
    return pl.concat(
        [
            ph.group_by("op_class")
            .agg(pl.col("dur_ns").median().alias("kernel_median_ns"))
            .with_columns(pl.lit("trace").alias("scope_kind"), pl.lit("trace").alias("scope")),
            ph.drop_nulls("scope")
            .group_by("scope", "op_class")
            .agg(pl.col("dur_ns").median().alias("kernel_median_ns"))
            .with_columns(pl.lit("phase").alias("scope_kind")),
        ],
        how="diagonal_relaxed",
    )


def _leaf_phase(closure: pl.DataFrame, unit_ph: pl.DataFrame) -> pl.LazyFrame:
    """:func:`~tracekit.analysis.regions.tops.leaf_phase` with the phase as ``scope``."""
    return leaf_phase(closure, unit_ph).rename({"phase": "scope"})


def _work_sums(count: pl.Expr, bits: dict[str, int | None]) -> list[pl.Expr]:
    """A group's ``count``, device and covered time, FLOPs and bytes (exact sums) and whether any is known."""
    return [
        count.cast(pl.Int64()).alias("count"),
        pl.col("dur_ns").sum().alias("device_time_ns"),
        pl.col("covered_time_ns").sum(),
        agg_sum("flops", bits),
        agg_sum("bytes", bits),
        pl.col("flops_known").any(),
        pl.col("bytes_known").any(),
    ]


def shape_roofline(
    acts: pl.DataFrame,
    costs: pl.DataFrame,
    regions: pl.DataFrame,
    unit_ph: pl.DataFrame,
    hardware: Hardware | None,
    th: Thresholds,
    prep: pl.DataFrame | None = None,
    closure: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The top ops by (name, input shapes) of the trace and of each phase, with the same roofline
    columns as :func:`class_roofline` (``op_class`` = the class of most of the op's device time).
    ``prep`` and ``closure`` as there. One lazy plan after the op positions, collected once."""
    if "input_dims" not in costs.columns:
        return pl.DataFrame()

    costed = (prepare(acts) if prep is None else prep).filter(pl.col("cost_op_id").is_not_null())
    bits = frac_bits(costed)
    pos = positions(costed["cost_op_id"], costs["op_id"])
    a = costed.lazy().with_columns(
        pl.lit(take(costs["input_dims"], pos)).fill_null("").str.replace_all(r"\s+", "").alias("shape")
    )
    closure = region_closure(regions, acts) if closure is None else closure
    a = a.join(
        _leaf_phase(closure, unit_ph).rename({"_leaf": "region_id"}), on="region_id", how="left", nulls_equal=True
    )
    keys = ["cost_op_name", "shape"]
    agg = [
        *_work_sums(pl.col("cost_op_id").n_unique(), bits),
        pl.col("dur_ns").median().alias("kernel_median_ns"),
        pl.col("dtype").drop_nulls().first().alias("dtype"),
        pl.col("op_class").sort_by("dur_ns", descending=True).first().alias("op_class"),
    ]
    rows = pl.concat(
        [
            a.group_by(keys).agg(agg).with_columns(pl.lit("trace").alias("scope_kind"), pl.lit("trace").alias("scope")),
            a.drop_nulls("scope").group_by("scope", *keys).agg(agg).with_columns(pl.lit("phase").alias("scope_kind")),
        ],
        how="diagonal_relaxed",
    ).rename({"cost_op_name": "name"})
    rows = rows.with_columns(to_float(list(FLOAT_SUMS), bits))
    rows = rows.sort(
        ["scope_kind", "scope", "device_time_ns", "name", "shape"], descending=[False, False, True, False, False]
    )
    rows = rows.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over("scope_kind", "scope").alias("rank"))
    rows = rows.with_columns((pl.col("device_time_ns") / pl.col("count")).alias("kernel_mean_ns"))
    # every shape is checked against its roof, not only the top ones: a shape above it (a cost
    # overcount diluted in its class, a gather priced at its table) is kept beyond the top list,
    # with its rank, so every output flags it
    return (
        _verdicts(rows, hardware, th)
        .filter((pl.col("rank") <= TOP_SHAPES) | pl.col(ABOVE_ROOF_COLUMN).fill_null(False))
        .drop("flops_known", "bytes_known")
        .collect(engine="in-memory")
    )


def dominant_class(cr: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Per scope of ``kind``: ``scope, class_top, class_above_roof`` — the class with most device
    time, its share, verdict and % of roof in words (``gemm 54 % of time, bandwidth at 31 % of
    roof``; ``… at 546 % of roof (above the roof)`` above it), and whether it is above its roof."""
    d = (
        cr.filter(pl.col("scope_kind") == kind)
        .sort(["scope", "device_time_ns"], descending=[False, True])
        .unique("scope", keep="first")
    )
    roof = pl.when(pl.col("frac_roof").is_not_null()).then(
        pl.format(", {} at {} of roof", pl.col("bound"), fmt_pct(pl.col("frac_roof")))
    )
    flag = pl.when(pl.col("underused")).then(pl.format(" — underused: {}", pl.col("underused_cause")))
    above = pl.col(ABOVE_ROOF_COLUMN).fill_null(False)
    return d.select(
        "scope",
        pl.format(
            "{} {} of time{}{}{}",
            pl.col("op_class"),
            fmt_pct(pl.col("share")),
            roof.otherwise(pl.lit("")),
            pl.when(above).then(pl.lit(" (above the roof)")).otherwise(pl.lit("")),
            flag.otherwise(pl.lit("")),
        ).alias("class_top"),
        above.alias("class_above_roof"),
    )
