"""Glue between the region/phase metrics and the idle causes (:mod:`tracekit.analysis.idle.causes`):
cause totals and the top culprit per region and phase, launch delays per phase."""

from __future__ import annotations

import polars as pl

from tracekit.analysis.idle.causes import (
    BUSY_OTHER,
    CAUSE_COLUMNS,
    OTHER,
    culprit_sums,
    describe,
    host_threads,
    idle_causes,
    ops_overlapping,
    ranked,
    ranked_order,
    sum_totals,
    totals_and_culprits,
)
from tracekit.analysis.idle.host_segments import op_segments
from tracekit.analysis.idle.intervals import union
from tracekit.analysis.regions.blocks import in_blocks
from tracekit.analysis.verdict import fmt_dur

TOP_CULPRITS = 5
# linked activities per block of regions whose idle causes are computed together (_causes_by_block)
IDLE_BLOCK = 1 << 16
CULPRIT_COLUMNS = ["scope_kind", "scope", "rank", "cause", "op", "call", "idle_ns", "count", "share", "text"]


def region_idle(
    reg: pl.DataFrame,
    linked: pl.DataFrame,
    ops: pl.DataFrame | None,
    host: tuple[pl.DataFrame, pl.DataFrame],
    other: pl.DataFrame | None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Add ``idle_<cause>_ns``, ``idle_causes_ns`` and ``idle_top`` (the largest culprit in words)
    to the region rows, and the other work in their windows: ``other_busy_ns``, ``queued_ns`` and
    ``other_top`` (the largest owner in words); return them with the per-region culprits: the idle
    ones ranked, then the other work's (cause :data:`BUSY_OTHER`, ``op`` = owner) ranked apart.
    ``host``: (blocking calls, threads) from :func:`analysis_host`.
    ``other``: :func:`tracekit.analysis.idle.causes.device_work`, or None (no other work seen).
    A region's device is the one that ran most of its linked activities (then the smallest)."""
    main, dev = _thread_and_device(linked)
    win = (
        reg.lazy()
        .join(main, on="region_id", how="left")
        .join(dev, on="region_id", how="left")
        .select(
            "region_id",
            pl.coalesce("pid", "_lp").alias("pid"),
            pl.coalesce("tid", "_lt").alias("tid"),
            "start_ns",
            "end_ns",
            "first_launch_ns",
            "first_ns",
            "last_ns",
            pl.col("device").cast(pl.Int64()),
        )
        .collect(engine="in-memory")
    )
    tot, cul = _causes_by_block(win, linked, ops, host, other)
    cul = split_culprits(cul, "region_id")
    sums = (*CAUSE_COLUMNS, "idle_causes_ns", *OTHER_COLUMNS)
    out = reg.lazy().drop([*sums, "idle_top", "other_top"], strict=False).join(tot.lazy(), on="region_id", how="left")
    out = _with_tops(out, cul.lazy(), "region_id").with_columns(*[pl.col(c).fill_null(0) for c in sums])
    return out.collect(engine="in-memory"), cul


def _thread_and_device(linked: pl.DataFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per region: its main launching thread (``_lp, _lt``: most launches, then the smallest pid,
    tid) and its device (most linked activities, then the smallest); counted one block of whole
    regions at a time on a big trace (regions/blocks.py)."""
    cols = [c for c in ("region_id", "launch_pid", "launch_tid", "device") if c in linked.columns]
    most = {"by": ["len", "launch_pid", "launch_tid"], "descending": [True, False, False]}
    mains: list[pl.LazyFrame] = []
    devs: list[pl.LazyFrame] = []
    for part in in_blocks(linked.select(cols)):
        q = part.lazy()
        main = (
            q.filter(pl.col("launch_pid").is_not_null())
            .group_by("region_id", "launch_pid", "launch_tid")
            .len()
            .group_by("region_id")
            .agg(
                pl.col("launch_pid").sort_by(**most).first().alias("_lp"),  # type: ignore[arg-type]
                pl.col("launch_tid").sort_by(**most).first().alias("_lt"),  # type: ignore[arg-type]
            )
            if "launch_pid" in cols
            else pl.LazyFrame(schema={"region_id": pl.Int64(), "_lp": pl.Int64(), "_lt": pl.Int64()})
        )
        dev = (
            q.group_by("region_id", "device")
            .len()
            .group_by("region_id")
            .agg(pl.col("device").sort_by(["len", "device"], descending=[True, False]).first())
            if "device" in cols
            else pl.LazyFrame(schema={"region_id": pl.Int64(), "device": pl.Int64()})
        )
        if part.height < linked.height:  # one block of several: counted now, its rows let go
            main, dev = (f.lazy() for f in pl.collect_all([main, dev], engine="in-memory"))
        mains.append(main)
        devs.append(dev)
    return pl.concat(mains), pl.concat(devs)


def _with_tops(rows: pl.LazyFrame, cul: pl.LazyFrame, key: str) -> pl.LazyFrame:
    """``rows`` with, per ``key``, ``idle_top`` (the largest idle culprit in words) and
    ``other_top`` (the largest other work, :func:`other_text`): the rank-1 culprits."""
    top = cul.with_columns(*_owners(key)).filter(pl.col("rank") == 1)
    other = pl.col("cause") == BUSY_OTHER
    idle_top = top.filter(~other).select(key, _text().alias("idle_top"))
    other_top = top.filter(other).select(key, other_text().alias("other_top"))
    return rows.join(idle_top, on=key, how="left").join(other_top, on=key, how="left")


OTHER_COLUMNS = ("other_busy_ns", "queued_ns")


def split_culprits(cul: pl.DataFrame, key: str) -> pl.DataFrame:
    """Culprit sums (ranked or not) as the idle culprits ranked per ``key``, then the other work's
    rows summed per owner (``cause`` :data:`BUSY_OTHER`, ``count`` = activities) ranked apart."""
    is_other = pl.col("cause").is_in([*OTHER, BUSY_OTHER])
    idle = cul.lazy().filter(~is_other).select(key, "cause", "op", "call", "idle_ns", "count")
    oth = (
        cul.lazy()
        .filter(is_other)
        .group_by(key, "op")
        .agg(pl.col("idle_ns").sum(), pl.col("count").sum())
        .select(
            key,
            pl.lit(BUSY_OTHER).alias("cause"),
            "op",
            pl.lit(None, dtype=pl.String()).alias("call"),
            "idle_ns",
            "count",
        )
    )
    a, b = pl.collect_all([idle, oth], engine="in-memory")
    return pl.concat([ranked(a, key), ranked(b, key)])


def _owners(key: str) -> list[pl.Expr]:
    """``_owners`` (rows of the same scope and cause: for other work, its owners) and ``_total``
    (their time), which :func:`other_text` reads."""
    return [
        pl.len().over(key, "cause").alias("_owners"),
        pl.col("idle_ns").sum().over(key, "cause").alias("_total"),
    ]


def other_text() -> pl.Expr:
    """The largest other work in words: ``13.5 ms previous-iteration tail (502 activities)``; with
    several owners, of how much by how many: ``1.0 ms layer_0 (1 activity) of 3.0 ms by 3 owners``
    (reads ``_owners`` and ``_total``: :func:`_owners`)."""
    n = pl.col("count")
    acts = pl.when(n == 1).then(pl.lit("activity")).otherwise(pl.lit("activities"))
    one = pl.format("{} {} ({} {})", fmt_dur(pl.col("idle_ns")), pl.col("op"), n, acts)
    return (
        pl.when(pl.col("_owners") > 1)
        .then(pl.format("{} of {} by {} owners", one, fmt_dur(pl.col("_total")), pl.col("_owners")))
        .otherwise(one)
    )


def _causes_by_block(
    win: pl.DataFrame,
    linked: pl.DataFrame,
    ops: pl.DataFrame | None,
    host: tuple[pl.DataFrame, pl.DataFrame],
    other: pl.DataFrame | None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(cause totals, culprits) of the windows ``win``, computed for blocks of regions of about
    :data:`IDLE_BLOCK` linked activities each, in window-start order, so the idle
    pieces and their splits are held for one block at a time (the 860 MB replica: 567 k linked
    activities, 613 k idle pieces, ~260 MB of transients at once). Each block's op stretches are
    built from the ops that overlap its windows' time range (:func:`ops_overlapping`), so the
    2.1 M stretches of the replica (~85 MB) are never held at once. Everything is per region, so the blocks' totals
    and culprits concatenated (culprits sorted again in their own order) are the whole answer."""
    blocking, threads = host
    if linked.height <= IDLE_BLOCK:
        pieces = idle_causes(win, linked, ops, (blocking, op_segments(ops, threads, names=False)), other)
        return totals_and_culprits(pieces)
    weight = win.select("region_id", "start_ns", "end_ns").join(
        linked.group_by("region_id").len(), on="region_id", how="left"
    )
    weight = weight.sort("start_ns", "region_id").with_columns(
        ((pl.col("len").fill_null(0).cast(pl.Int64()) + 1).cum_sum() // IDLE_BLOCK).alias("_b")
    )
    tots, culs = [], []
    for (b,), rows in weight.group_by("_b", maintain_order=True):
        ids = rows["region_id"].implode()
        lo, hi = rows.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
        segs = op_segments(ops_overlapping(ops, lo, hi), threads, names=False)
        pieces = idle_causes(
            win.filter(pl.col("region_id").is_in(ids)),
            linked.filter(pl.col("region_id").is_in(ids)),
            ops,
            (blocking, segs),
            other,
        )
        del segs
        sums = culprit_sums(pieces)
        tots.append(sum_totals(sums))
        culs.append(sums)  # ordered and ranked once, all blocks together
        del pieces
    return pl.concat(tots), ranked(pl.concat(culs))


def analysis_host(
    reg: pl.DataFrame, acts: pl.DataFrame, launches: pl.DataFrame | None, ops: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(blocking calls, threads) of every thread a window can use: the regions' own threads and
    every launching thread (:func:`tracekit.analysis.idle.causes.host_threads`), computed once; the op
    stretches of those threads are built per block of regions (:func:`region_idle`)."""
    parts = [reg.select("pid", "tid")]
    if "launch_pid" in acts.columns:
        parts.append(acts.select(pl.col("launch_pid").alias("pid"), pl.col("launch_tid").alias("tid")).unique())
    return host_threads(launches, ops, pl.concat(parts, how="vertical_relaxed"))


def _text() -> pl.Expr:
    return pl.format("{} {}", fmt_dur(pl.col("idle_ns")), describe(pl.col("cause"), pl.col("op"), pl.col("call")))


def phase_idle(ph: pl.DataFrame, reg: pl.DataFrame, cul: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Phase rows gain the summed cause columns and ``idle_top``; return them with the phase
    culprits (the units' culprits summed by (cause, op, call)). One polars query."""
    units = reg.lazy().filter(pl.col("is_unit"))
    other = pl.col("cause") == BUSY_OTHER
    pc = (
        cul.lazy()
        .join(units.select("region_id", "phase"), on="region_id")
        .group_by("phase", "cause", "op", "call")
        .agg(pl.col("idle_ns").sum(), pl.col("count").sum())
        .pipe(ranked_order, "phase")
        .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over("phase", other).alias("rank"))
    )
    if ph.height == 0:
        return ph, pc.collect(engine="in-memory")
    cols = (*CAUSE_COLUMNS, "idle_causes_ns")
    sums = units.group_by("phase").agg(*[pl.col(c).sum() for c in cols])
    out = _with_tops(
        ph.lazy().drop([*cols, "idle_top", "other_top"], strict=False).join(sums, on="phase", how="left"), pc, "phase"
    )
    ph, pcs = pl.collect_all([out, pc], engine="in-memory")
    return ph, pcs


def culprit_frame(reg_cul: pl.DataFrame, ph_cul: pl.DataFrame, reg: pl.DataFrame, ph: pl.DataFrame) -> pl.DataFrame:
    """The top culprits of every region and phase in one frame (``CULPRIT_COLUMNS``), ``share``
    = of the scope's idle time. One polars query."""
    idle = pl.col("cause") != BUSY_OTHER  # the other work is not idle: not a culprit
    r = (
        reg_cul.lazy()
        .filter((pl.col("rank") <= TOP_CULPRITS) & idle)
        .join(reg.lazy().select("region_id", pl.col("idle_ns").alias("_scope_idle")), on="region_id")
        .select(
            pl.lit("region").alias("scope_kind"),
            pl.col("region_id").cast(pl.String()).alias("scope"),
            pl.exclude("region_id"),
        )
    )
    pidle = (
        ph.lazy().select("phase", pl.col("idle_ns").alias("_scope_idle"))
        if ph.height and "idle_ns" in ph.columns
        else pl.LazyFrame(schema={"phase": pl.String(), "_scope_idle": pl.Int64()})
    )
    p = (
        ph_cul.lazy()
        .filter((pl.col("rank") <= TOP_CULPRITS) & idle)
        .join(pidle, on="phase", how="left")
        .select(pl.lit("phase").alias("scope_kind"), pl.col("phase").alias("scope"), pl.exclude("phase"))
    )
    out = pl.concat([p, r], how="diagonal_relaxed")
    return (
        out.with_columns(
            pl.when(pl.col("_scope_idle") > 0).then(pl.col("idle_ns") / pl.col("_scope_idle")).alias("share"),
            _text().alias("text"),
        )
        .select(CULPRIT_COLUMNS)
        .collect(engine="in-memory")
    )


def launch_delay(linked_units: pl.DataFrame, acts: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per phase: launch delay (launch call start → its first device activity start) ``count,
    p50_ns, p99_ns, max_ns``; one value per launch (graph replays count their first kernel).
    With ``acts`` (every activity: ``device, start_ns, end_ns``) and launch ends and ``free_ns``,
    each launch's wait from its call's end to its start is split (:func:`launch_waits`) into
    launch latency (the stream free and the device idle) and queued (anything else), with
    ``launch_latency_{p50,p99,max}_ns`` and ``launch_queued_{p50,p99,max}_ns``."""
    need = {"phase", "start_ns", "launch_start_ns", "correlation"}
    if not need <= set(linked_units.columns):
        return pl.DataFrame(schema={"phase": pl.String()})
    split = acts is not None and {"launch_end_ns", "free_ns", "device"} <= set(linked_units.columns)
    d = (
        linked_units.filter(pl.col("launch_start_ns").is_not_null())
        .sort("start_ns", "act_id" if "act_id" in linked_units.columns else "start_ns")
        .group_by("phase", "correlation")
        .agg(
            pl.col("start_ns").first(),
            pl.col("launch_start_ns").first(),
            *([pl.col(c).first() for c in ("launch_end_ns", "free_ns", "device")] if split else []),
        )
        .with_columns((pl.col("start_ns") - pl.col("launch_start_ns")).alias("_d"))
    )
    stats = [pl.len().cast(pl.Int64()).alias("launch_delay_count")]
    waits = [("_d", "launch_delay")]
    if split and acts is not None:
        d = d.hstack(launch_waits(d.select("launch_end_ns", "free_ns", "start_ns", "device"), acts).get_columns())
        waits += [("_lat", "launch_latency"), ("_que", "launch_queued")]
    for c, name in waits:
        x = pl.col(c).drop_nulls()  # (a launch delay is never null)
        stats += [
            x.quantile(0.5, "linear").alias(f"{name}_p50_ns"),
            x.quantile(0.99, "linear").alias(f"{name}_p99_ns"),
            x.max().cast(pl.Int64()).alias(f"{name}_max_ns"),
        ]
    return d.group_by("phase").agg(*stats)


def launch_waits(w: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """``_lat, _que`` for each row of ``w`` (``launch_end_ns``, ``free_ns`` from
    :func:`tracekit.analysis.idle.causes.launch_free`, ``start_ns`` of the launch's first
    activity, ``device``): of its wait [launch call end, start), the launch latency is the time
    from ``free_ns`` (its stream free, no event to wait on) in which its device ran nothing; the
    rest is queued (behind earlier work on the stream, an event, or other work on the device).
    Null where the launch end is unknown. The device's busy time before t comes from the union of
    every activity per device and a prefix sum, found by binary search on group-major keys."""
    q = w.with_columns(
        pl.col("device").fill_null(-1).cast(pl.Int64()),
        pl.min_horizontal(pl.coalesce("free_ns", "launch_end_ns"), "start_ns").alias("_lo"),
        (pl.col("start_ns") - pl.col("launch_end_ns")).clip(lower_bound=0).alias("_wait"),
    )
    dev = pl.col("device").fill_null(-1).cast(pl.Int64()) if "device" in acts.columns else pl.lit(0, pl.Int64())
    busy = union(acts.select(dev.alias("device"), pl.col("start_ns").alias("s"), pl.col("end_ns").alias("e")), "device")
    known = pl.col("launch_end_ns").is_not_null()
    if busy.height == 0 or q.height == 0:
        lat = pl.when(known).then(pl.col("start_ns") - pl.col("_lo"))
        return q.select(lat.alias("_lat"), (pl.col("_wait") - lat).alias("_que"))
    lo_min, hi_max = q.select(pl.col("_lo").min(), pl.col("start_ns").max()).row(0)
    t0 = min(int(busy["s"].min()), int(lo_min if lo_min is not None else busy["s"].min()))  # type: ignore[arg-type]
    t1 = max(int(busy["e"].max()), int(hi_max if hi_max is not None else 0))  # type: ignore[arg-type]
    ext = t1 - t0 + 1
    ps = busy["device"] * ext + (busy["s"] - t0)
    length = busy["e"] - busy["s"]
    cum = length.cum_sum() - length  # busy time before each interval, all devices in order

    def busy_before(t: pl.Expr) -> pl.Expr:  # busy time on the row's device before t
        i = pl.lit(ps).search_sorted(pl.col("device") * ext + (t - t0), side="right").cast(pl.Int64()) - 1
        j = i.clip(lower_bound=0)
        same = (i >= 0) & (pl.lit(busy["device"]).gather(j) == pl.col("device"))
        first = pl.lit(busy["device"]).search_sorted(pl.col("device"), side="left").cast(pl.Int64())
        base = pl.lit(cum).gather(j) - pl.lit(cum).gather(first.clip(upper_bound=busy.height - 1))
        inside = (pl.min_horizontal(t, pl.lit(busy["e"]).gather(j)) - pl.lit(busy["s"]).gather(j)).clip(lower_bound=0)
        return pl.when(same).then(base + inside).otherwise(0)

    free = (pl.col("start_ns") - pl.col("_lo")) - (busy_before(pl.col("start_ns")) - busy_before(pl.col("_lo")))
    lat = pl.when(known).then(free)
    return q.select(lat.alias("_lat"), (pl.col("_wait") - lat).alias("_que"))
