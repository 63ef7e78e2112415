"""Per-group device metrics: span, busy (union of intervals), launch gaps, kernel statistics,
FLOPs / minimum bytes and cost-model coverage. See docs/analysis.md for every definition.

Everything here is a frame → frame transform. The input is an *activity* frame with a group
key column (a region id, a phase name, or a constant for the whole trace) and at least
``act_id, start_ns, end_ns, dur_ns, op_id``; :func:`with_costs` adds the op cost columns.
"""

from __future__ import annotations

from typing import Any, TypeVar

import polars as pl

from tracekit.tables.schema import null_constants
from tracekit.tables.gather import take

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)

# Columns every metric frame carries (beside the group key). Documented in docs/analysis.md.
METRIC_COLUMNS: dict[str, pl.DataType] = {
    "kernel_count": pl.Int64(),
    "first_ns": pl.Int64(),
    "last_ns": pl.Int64(),
    "busy_ns": pl.Int64(),
    "covered_busy_ns": pl.Int64(),
    "comm_busy_ns": pl.Int64(),
    "device_time_ns": pl.Int64(),
    "gap_count": pl.Int64(),
    "gap_total_ns": pl.Int64(),
    "gap_max_ns": pl.Int64(),
    "kernel_median_ns": pl.Float64(),
    "flops": pl.Float64(),
    "bytes": pl.Float64(),
    "dtype": pl.String(),
}

SPECIAL_MODELS = ("counted_in_child", "counted_in_parent")


def positions(keys: pl.Series, ids: pl.Series) -> pl.Series:
    """For each key, the row of ``ids`` holding it (Int64; null when absent; the first row when an
    id repeats). Loaders and attribution number rows consecutively (``op_id``, ``act_id`` = row),
    and then this is arithmetic; otherwise one hash join."""
    n = ids.len()
    k = keys.cast(pl.Int64())
    if n and ids.dtype.is_integer() and ids.null_count() == 0:
        lo, hi = ids[0], ids[-1]
        # consecutive ids: compared with their range by Series arithmetic (no polars query)
        if hi - lo == n - 1 and (
            n == 1 or bool((ids.cast(pl.Int64()) == pl.int_range(lo, hi + 1, dtype=pl.Int64(), eager=True)).all())
        ):
            p = k - lo
            if bool(((p >= 0) & (p < n)).all()):  # all inside (the usual case): no masking query
                return p.alias("pos")
            return pl.select(pl.when((p >= 0) & (p < n)).then(p).alias("pos")).to_series()
    index = pl.DataFrame({"_k": ids.cast(pl.Int64()), "pos": pl.int_range(n, eager=True, dtype=pl.Int64())})
    index = index.unique("_k", keep="first")
    return pl.DataFrame({"_k": k}).join(index, on="_k", how="left", maintain_order="left")["pos"]


def _cost_flags(costs: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """(owns its cost, covered by some model) per op row."""
    own = (
        pl.col("cost_model").is_not_null()
        & ~pl.col("cost_model").is_in(SPECIAL_MODELS)
        & (pl.col("flops").is_not_null() | pl.col("bytes").is_not_null())
    )
    covered = pl.col("covered") if "covered" in costs.columns else pl.col("cost_model").is_not_null()
    f = costs.select(own.fill_null(False).alias("own"), covered.fill_null(False).alias("cov"))
    return f["own"], f["cov"]


def owner_positions(costs: pl.DataFrame, op_pos: pl.Series) -> pl.Series:
    """For each op row of ``costs`` in ``op_pos`` (the launching ops): the row of the op that owns
    its cost; a Series as long as ``costs``, null where there is none (or the op is not in ``op_pos``).

    The cost model prices each unit of work once per op stack (docs/costmodel.md): an op with its
    own formula owns its cost; an op folded into a costed ancestor (``counted_in_parent``, e.g.
    the ``aten::pow`` inside a composite ``aten::rms_norm``) or otherwise covered by one defers to
    that ancestor. Along any root-to-leaf path at most one op owns a cost, so on each thread the
    owning ops' intervals do not nest, and the owner of a covered op is the owning op that starts
    last at or before it on its thread and ends at or after its end: one as-of join, no walk.
    """
    own, cov = _cost_flags(costs)
    out = pl.repeat(None, costs.height, dtype=pl.Int64(), eager=True).alias("owner")
    if not own.any():  # no op owns a cost (e.g. a trace without shapes): no owner, no query over the ops
        return out
    # one query (a small trace pays per polars query): the launching ops that own their cost,
    # and the covered ones matched to the owning op around them
    base = (
        costs.lazy()
        .select("pid", "tid", "start_ns", "end_ns")
        .with_columns(own.alias("_own"), cov.alias("_cov"))
        .with_row_index("_opos")
        .with_columns(pl.col("_opos").cast(pl.Int64()))
    )
    launching = (
        op_pos.cast(pl.Int64())
        .to_frame("_pos")
        .lazy()
        .drop_nulls()
        .unique()
        .join(base, left_on="_pos", right_on="_opos")
    )
    todo = launching.filter(~pl.col("_own") & pl.col("_cov")).drop("_own", "_cov").sort("start_ns")
    owners = (
        base.filter(pl.col("_own"))
        .select("pid", "tid", "_opos", pl.col("start_ns").alias("_os"), pl.col("end_ns").alias("_oe"))
        .sort("_os")
    )
    found_q = todo.join_asof(
        owners, left_on="start_ns", right_on="_os", by=["pid", "tid"], strategy="backward", check_sortedness=False
    ).filter(pl.col("_oe") >= pl.col("end_ns"))
    direct_f, found = pl.collect_all([launching.filter(pl.col("_own")).select("_pos"), found_q], engine="in-memory")
    direct = direct_f["_pos"]
    if direct.len():
        out = out.scatter(direct, direct)
    if found.height:
        out = out.scatter(found["_pos"], found["_opos"])
    return out


COST_COLUMNS = ("cost_op_id", "cost_op_name", "op_flops", "op_bytes", "cost_model", "dtype", "covered")


def with_costs(acts: pl.DataFrame, costs: pl.DataFrame) -> pl.DataFrame:
    """Add to each activity the cost of the op that owns its work (see :func:`owner_positions`):
    ``cost_op_id``, ``cost_op_name``, ``op_flops``, ``op_bytes``, ``cost_model``, ``dtype`` (the
    owner's, else the launching op's), and ``covered`` (the launching op's work is inside some
    cost model). Activities without an op are not covered. Costs stay per op:
    :func:`group_metrics` counts each owner once per group. Every column is a positional gather
    from the ops table (no join at activity scale, no copy of the activities' own columns).
    """
    pos = positions(acts["op_id"], costs["op_id"])
    _, cov = _cost_flags(costs)
    opos = take(owner_positions(costs, pos), pos)
    # no activity has a cost owner (e.g. a trace without shapes): the owner's columns are null
    # constants, not gathered as nulls per activity (the 860 MB replica: ~40 MB of transients)
    no_owner = opos.null_count() == opos.len()

    def col(name: str, dtype: pl.DataType, at: pl.Series) -> pl.Expr:
        if name not in costs.columns or (no_owner and at is opos):
            return pl.lit(None, dtype=dtype)
        # a gather in the engine: a column held as a null constant stays one (no per-row copy)
        return pl.col(name).gather(at).cast(dtype)

    added = costs.select(
        col("op_id", pl.Int64(), opos).alias("cost_op_id"),
        col("name", pl.String(), opos).alias("cost_op_name"),
        col("flops", pl.Float64(), opos).alias("op_flops"),
        col("bytes", pl.Float64(), opos).alias("op_bytes"),
        col("cost_model", pl.String(), opos).alias("cost_model"),
        pl.coalesce(col("dtype", pl.String(), opos), col("dtype", pl.String(), pos)).alias("dtype"),
        pl.lit(take(cov, pos)).fill_null(False).alias("covered"),
    )
    # cost columns that are all null (no op of the trace has a cost model) hold no memory per row
    return pl.concat([acts.drop(COST_COLUMNS, strict=False), null_constants(added)], how="horizontal")


def dominant_dtype(acts: pl.DataFrame, key: str) -> pl.LazyFrame:
    """The dtype of the covered ops that took the most device time in each group, preferring
    floating-point dtypes (fp*, bf16, tf32): an index or embedding op's int64 input should not
    pick the ridge of a matmul-heavy region. An integer dtype wins only when no float is present.
    A lazy query (``key, dtype``; no rows when nothing is covered)."""
    d = acts.lazy().filter(pl.col("covered") & pl.col("dtype").is_not_null())
    is_float = pl.col("dtype").str.contains(r"^(fp|bf|tf)")
    return (
        d.group_by(key, "dtype")
        .agg(pl.col("dur_ns").sum().alias("_t"))
        .with_columns(is_float.alias("_f"))
        .sort([key, "_f", "_t", "dtype"], descending=[False, True, True, False])
        .group_by(key, maintain_order=True)
        .agg(pl.col("dtype").first())
        .cast({key: acts.schema[key], "dtype": pl.String()})
    )


def first_of(df: pl.DataFrame, key: str, item: str) -> pl.Series:
    """True on the first row of each (``key``, ``item``) pair, nulls being equal; one int64 key
    when both are integers that pack, else a struct."""
    k, i = df[key], df[item]
    pair: pl.Expr = pl.struct(key, item)
    if k.dtype.is_integer() and i.dtype.is_integer() and df.height:
        k0, k1 = (int(k.min()), int(k.max())) if k.null_count() < k.len() else (0, 0)  # type: ignore[arg-type]
        i0, i1 = (int(i.min()), int(i.max())) if i.null_count() < i.len() else (0, 0)  # type: ignore[arg-type]
        m = i1 - i0 + 2  # room for null as the last value
        if (k1 - k0 + 2) * m < 2**62:
            pair = (pl.col(key).cast(pl.Int64()) - k0).fill_null(k1 - k0 + 1) * m + (
                pl.col(item).cast(pl.Int64()) - i0
            ).fill_null(i1 - i0 + 1)
    return df.select(pair.is_first_distinct()).to_series()


def _op_totals(acts: pl.DataFrame, key: str) -> pl.LazyFrame:
    """FLOPs and minimum bytes per group: each op counted once, however many kernels it launched
    (its first activity in frame order, so the sums run in the same order as before)."""
    ops = acts.select(key, "cost_op_id", "op_flops", "op_bytes").filter(pl.col("cost_op_id").is_not_null())
    return (
        ops.filter(first_of(ops, key, "cost_op_id"))
        .lazy()
        .group_by(key)
        .agg(
            pl.col("op_flops").sum().alias("flops"),
            pl.col("op_bytes").sum().alias("bytes"),
        )
    )


def sweep(acts: pl.DataFrame, key: str) -> pl.DataFrame:
    """One sorted sweep per group: busy (union length, as :func:`tracekit.tables.intervals.union_length`
    computes it), covered busy, launch gaps, counts. Returns ``key, kernel_count, first_ns,
    last_ns, busy_ns, covered_busy_ns, device_time_ns, kernel_median_ns, gap_count,
    gap_total_ns, gap_max_ns``.

    Each activity contributes the part of it beyond the running maximum end of the earlier ones
    in its group; a gap precedes it when it starts after that maximum. To run the running maximum
    once over the whole frame (no per-group window), group g's times are shifted by
    g × (extent of all times + 1), which keeps groups apart; g is the integer key itself minus its
    minimum when the key is an integer without nulls (one int64 sort, skipped when already in
    order), else a group number after a (key, start) sort. When that could overflow int64 the
    per-group window is used instead. Busy, covered busy and gap totals do not depend on the
    order of activities with equal starts.
    """
    return _sweep(acts, key).collect(engine="in-memory")


def _sweep(acts: pl.DataFrame, key: str) -> pl.LazyFrame:
    """:func:`sweep` as a lazy query: with an integer key, one query for the bounds and the rest
    in the caller's plan (a small trace pays per polars query)."""
    comm = pl.col("comm").fill_null(False) if "comm" in acts.columns else pl.lit(False)
    # communication is never covered work: coverage is priced work over non-communication busy time
    q = acts.lazy().select(
        key,
        "start_ns",
        "end_ns",
        "dur_ns",
        (pl.col("covered").fill_null(False) & ~comm).alias("covered"),
        comm.alias("comm"),
    )
    q, packed, t0 = _ordered(acts, q, key)
    return _busy_sums(q, key, packed, t0)


def _ordered(acts: pl.DataFrame, q: pl.LazyFrame, key: str) -> tuple[pl.LazyFrame, bool, int]:
    """``q`` in (key, start) order with ``_first`` (a group's first row) and, where one int64 cannot
    overflow, the group packed into shifted times ``_s``/``_e`` with its ``_floor``; whether it is
    packed; the earliest start."""
    kd = acts.schema[key]
    int_key = kd.is_integer() and acts[key].null_count() == 0
    # the bounds as Series minima and maxima (no polars query)
    got: list[Any] = [acts["start_ns"].min(), acts["end_ns"].max()]
    if int_key:
        got += [acts[key].min(), acts[key].max()]
    t0, t1 = got[0], got[1]
    extent = int(t1) - int(t0) + 1
    packed = False
    first = (pl.col(key) != pl.col(key).shift(1)).fill_null(True)
    if int_key:
        k0, k1 = got[2], got[3]
        if (int(k1) - int(k0) + 1) * extent < 2**62:  # the key itself numbers the groups
            packed = True
            off = (pl.col(key).cast(pl.Int64()) - int(k0)) * extent - int(t0)
            # a stable sort: an order already sorted stays as it is
            q = (
                q.with_columns((pl.col("start_ns") + off).alias("_s"))
                .sort("_s", maintain_order=True)
                .with_columns(
                    (pl.col("end_ns") + off).alias("_e"), (off - 1 + int(t0)).alias("_floor"), pl.col(key).set_sorted()
                )
            )
    if not packed:  # group numbers after a (key, start) sort
        w = q.collect(engine="in-memory")
        w = w.sort([key, "start_ns"]).with_columns(first.alias("_first"))
        w = w.with_columns(pl.col("_first").cast(pl.Int64()).cum_sum().alias("_g"))
        n_groups = int(w.select(pl.col("_g").max().fill_null(0)).item())
        if n_groups * extent < 2**62:
            packed = True
            off = (pl.col("_g") * extent) - int(t0)
            w = w.with_columns(
                (pl.col("start_ns") + off).alias("_s"),
                (pl.col("end_ns") + off).alias("_e"),
                (off - 1 + int(t0)).alias("_floor"),
            )
        q = w.lazy()
    else:
        q = q.with_columns(first.alias("_first"))
    return q, packed, int(t0)


def _busy_sums(q: pl.LazyFrame, key: str, packed: bool, t0: int) -> pl.LazyFrame:
    """Per group: kernels, first and last, busy (the union), covered and non-communication busy,
    device time, median kernel, gaps between the union's pieces."""
    if not packed:  # per-group windows (slower, never overflows)
        q = q.with_columns(
            pl.col("start_ns").alias("_s"), pl.col("end_ns").alias("_e"), pl.lit(int(t0) - 1).alias("_floor")
        )

    def before(end: pl.Expr) -> pl.Expr:  # the largest end of the group's earlier rows
        return end.cum_max().shift(1) if packed else end.cum_max().shift(1).over("_g")

    prev = before(pl.col("_e"))
    prev_cov = before(pl.when(pl.col("covered")).then(pl.col("_e")).otherwise(pl.col("_floor")))
    prev_nc = before(pl.when(~pl.col("comm")).then(pl.col("_e")).otherwise(pl.col("_floor")))
    q = q.with_columns(prev.alias("_prev"), prev_cov.alias("_prevc"), prev_nc.alias("_prevn"))
    # Values carried over from the previous group are below this group's shifted start.
    lo = pl.max_horizontal(pl.col("_s"), pl.col("_prev").fill_null(pl.col("_s")))
    lo_cov = pl.max_horizontal(pl.col("_s"), pl.col("_prevc").fill_null(pl.col("_s")))
    lo_nc = pl.max_horizontal(pl.col("_s"), pl.col("_prevn").fill_null(pl.col("_s")))
    gap = pl.when(pl.col("_first")).then(0).otherwise((pl.col("_s") - pl.col("_prev")).clip(lower_bound=0))
    q = q.select(
        key,
        "start_ns",
        "end_ns",
        "dur_ns",
        (pl.col("_e") - lo).clip(lower_bound=0).alias("_busy"),
        pl.when(pl.col("covered")).then((pl.col("_e") - lo_cov).clip(lower_bound=0)).otherwise(0).alias("_cbusy"),
        pl.when(pl.col("comm")).then(0).otherwise((pl.col("_e") - lo_nc).clip(lower_bound=0)).alias("_nbusy"),
        gap.alias("_gap"),
    )
    return q.group_by(key).agg(
        pl.len().cast(pl.Int64()).alias("kernel_count"),
        pl.col("start_ns").min().alias("first_ns"),
        pl.col("end_ns").max().alias("last_ns"),
        pl.col("_busy").sum().cast(pl.Int64()).alias("busy_ns"),
        pl.col("_cbusy").sum().cast(pl.Int64()).alias("covered_busy_ns"),
        (pl.col("_busy").sum() - pl.col("_nbusy").sum()).cast(pl.Int64()).alias("comm_busy_ns"),
        pl.col("dur_ns").sum().cast(pl.Int64()).alias("device_time_ns"),
        pl.col("dur_ns").median().cast(pl.Float64()).alias("kernel_median_ns"),
        (pl.col("_gap") > 0).sum().cast(pl.Int64()).alias("gap_count"),
        pl.col("_gap").sum().cast(pl.Int64()).alias("gap_total_ns"),
        pl.col("_gap").max().cast(pl.Int64()).alias("gap_max_ns"),
    )


def group_metrics(acts: pl.DataFrame, key: str) -> pl.DataFrame:
    """Device metrics per value of ``key`` over activities that already carry cost columns
    (see :func:`with_costs`). One row per group that has at least one activity.
    """
    if acts.height == 0:
        return pl.DataFrame(schema={key: acts.schema[key], **METRIC_COLUMNS})
    cols = [key, "start_ns", "end_ns", "dur_ns", "covered", "cost_op_id", "op_flops", "op_bytes", "dtype"]
    acts = acts.select(*cols, *(["comm"] if "comm" in acts.columns else []))
    out = (
        _sweep(acts, key)
        .join(_op_totals(acts, key), on=key, how="left")
        .join(dominant_dtype(acts, key), on=key, how="left")
    )
    return out.select(key, *[pl.col(c).cast(t) for c, t in METRIC_COLUMNS.items()]).collect(engine="in-memory")


def derived(df: pl.DataFrame) -> pl.DataFrame:
    """Ratios from the summed metrics (``span_ns`` and ``busy_ns`` must be present):
    idle (less ``other_busy_ns``, the other work on the device, when present), busy_ratio,
    coverage, intensity, achieved FLOP/s and bytes/s.

    Achieved rates divide by ``covered_busy_ns`` — the busy time of the activities the FLOPs
    and bytes came from — so an op without a cost model does not dilute them. With coverage 1
    that is the busy time itself.
    """
    span = pl.col("span_ns").cast(pl.Float64())
    busy = pl.col("busy_ns").cast(pl.Float64())
    # coverage leaves out the time only communication ran (docs/analysis.md, "coverage")
    work = busy - (pl.col("comm_busy_ns").cast(pl.Float64()).fill_null(0.0) if "comm_busy_ns" in df.columns else 0.0)
    cov_busy = pl.col("covered_busy_ns").cast(pl.Float64())
    flops = pl.col("flops")
    nbytes = pl.col("bytes")
    # idle: the window without the row's own work nor other work on its device (docs/analysis.md)
    other = pl.col("other_busy_ns").fill_null(0) if "other_busy_ns" in df.columns else pl.lit(0)
    return df.with_columns(
        (pl.col("span_ns") - pl.col("busy_ns") - other).alias("idle_ns"),
        pl.when(span > 0).then(busy / span).otherwise(None).alias("busy_ratio"),
        pl.when(work > 0).then(cov_busy / work).otherwise(0.0).alias("coverage"),
        pl.when(nbytes > 0).then(flops / nbytes).otherwise(None).alias("intensity"),
        pl.when(cov_busy > 0).then(flops / (cov_busy * 1e-9)).otherwise(None).alias("achieved_flops_per_s"),
        pl.when(cov_busy > 0).then(nbytes / (cov_busy * 1e-9)).otherwise(None).alias("achieved_bytes_per_s"),
    )


def rank_top(df: FrameT, keys: list[str], n: int = 10) -> FrameT:
    """Keep the ``n`` rows with most ``device_time_ns`` per ``keys`` group; add ``share`` (of the
    group's total device time) and ``rank`` from 1. Ties break by name. A LazyFrame gives a
    LazyFrame (the steps join the caller's plan)."""
    total = pl.col("device_time_ns").sum().over(keys)
    g = df.with_columns(pl.when(total > 0).then(pl.col("device_time_ns") / total).alias("share")).sort(
        [*keys, "device_time_ns", "name"], descending=[*([False] * len(keys)), True, False]
    )
    g = g.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over(keys).alias("rank"))
    first = [*keys, "rank", "name"]
    return g.filter(pl.col("rank") <= n).select(*first, pl.exclude(first))
