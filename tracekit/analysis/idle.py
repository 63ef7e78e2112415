"""Idle time by cause: every idle ns of a region's window gets exactly one cause (docs/analysis.md).

Idle = the window (:mod:`tracekit.analysis.windows`) minus the union of the region's device work.
Each idle stretch is cut where the host's state changes and each piece gets one cause, first
match wins:

``before_first_launch`` / ``after_last_kernel`` (e): before the region's first launch call or
    after its last device activity ends;
``blocking`` (b): the region's thread is inside a blocking synchronisation or copy call
    (:data:`BLOCKING`); named by the call and the outermost op that issued it;
``launch_latency`` (c): some launch of the region has been issued and its work has not started;
``cpu_op`` (a): the region's thread is running a CPU op; named by the innermost op;
``outside_ops`` (d): the host is outside any op (Python, scheduler, tokenisation).

The pieces partition the idle time, so the causes add up to ``idle_ns`` exactly; the analysis
checks that on every region (``idle_conserved``). The region's thread is its own (pid, tid), or
for a region without one (the whole-trace region of shape inference) the thread that made most
of its launches. Everything is interval arithmetic on sorted int64 columns: as-of joins find the
host intervals that overlap an idle stretch, no loop over events (tracekit/analysis/interval_split.py).
"""

from __future__ import annotations

from typing import TypeVar

import polars as pl

from tracekit.analysis.interval_split import disjoint, split, union
from tracekit.tables.take import take

# Runtime/driver calls that block the host until the device (or a copy) is done.
BLOCKING = (
    r"(?i)^(cuda|hip)(Stream|Device|Event|Ctx)Synchronize|^cu(Stream|Ctx|Event)Synchronize"
    r"|^(cuda|hip)Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol|WithStream|DtoH|HtoD|DtoD)?(?:_v2)?$"
    r"|^cuMemcpy(?:DtoH|HtoD|DtoD|2D|3D|Peer)?(?:_v2)?$|^(cuda|hip)Free(Host)?$|^cuMemFree"
)
CAUSES = ("blocking", "launch_latency", "cpu_op", "outside_ops", "before_first_launch", "after_last_kernel")
CAUSE_COLUMNS = [f"idle_{c}_ns" for c in CAUSES]
_SEG = ["region_id", "pid", "tid", "s", "e"]
_Frame = TypeVar("_Frame", pl.DataFrame, pl.LazyFrame)


def blocking_calls(launches: pl.DataFrame | None, ops: pl.DataFrame | None) -> pl.DataFrame:
    """Blocking runtime calls: ``pid, tid, s, e, call, op`` (op: the outermost op holding the call)."""
    schema = {
        "pid": pl.Int64(),
        "tid": pl.Int64(),
        "s": pl.Int64(),
        "e": pl.Int64(),
        "call": pl.String(),
        "op": pl.String(),
    }
    if launches is None or launches.height == 0:
        return pl.DataFrame(schema=schema)
    b_q = launches.lazy().filter(pl.col("name").str.contains(BLOCKING))
    b_q = b_q.select(
        "pid", "tid", pl.col("start_ns").alias("s"), pl.col("end_ns").alias("e"), pl.col("name").alias("call")
    )
    queries = [b_q]
    if ops is not None and ops.height and "depth" in ops.columns:
        top_q = ops.lazy().filter(pl.col("depth") == 0)
        queries.append(top_q.select("op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"))
    b, *top = pl.collect_all(queries, engine="in-memory")
    op = pl.Series("op", [None] * b.height, dtype=pl.String())
    if b.height and top:
        from tracekit.tables.enclosing import innermost_rows

        pts = b.select("pid", "tid", pl.col("s").alias("t"))
        op = take(top[0]["name"], innermost_rows(pts, top[0], group=["pid", "tid"], id_col="op_id")).alias("op")
    return disjoint(b.lazy().with_columns(op).cast(schema))  # type: ignore[arg-type]


def op_segments(ops: pl.DataFrame | None, threads: pl.DataFrame, names: bool = True) -> pl.DataFrame:
    """Innermost-op stretches of the ops on ``threads`` (pid, tid): ``pid, tid, s, e, op`` (the
    ops' self time, as ``tracekit.tables.intervals.self_time_segments`` defines it).

    One sort of the start and end events per thread (ends before starts at equal times, deeper
    ends first, shallower starts first): after a start the innermost op is the one that started,
    after an end its parent; each event's stretch runs to the next event. Needs proper nesting
    (``parent_id`` = the innermost enclosing op on the thread, as the loaders give). An event is
    two int64 values, its packed sort key and the op it opens; thread and time are decoded from
    the key, names gathered only for the stretches (on the 860 MB replica's 1.1 M ops the
    events took ~100 MB more with their thread, time and order columns)."""
    schema = {"pid": pl.Int64(), "tid": pl.Int64(), "s": pl.Int64(), "e": pl.Int64(), "op": pl.String()}
    if not names:  # ``op`` = the op's op_id (8 bytes a stretch, not a 16-byte name view); see op_labels
        schema["op"] = pl.Int64()
    if ops is None or ops.height == 0 or threads.height == 0:
        return pl.DataFrame(schema=schema)
    if _packable_threads(ops, threads):
        return _op_segments_two_queries(ops, threads, schema, names)
    o = ops.select("op_id", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id")
    thr = threads.unique()
    if o.select("pid", "tid").unique().join(thr, on=["pid", "tid"], how="anti").height:  # else no copy
        o = o.join(thr, on=["pid", "tid"], how="semi")
    if o.height == 0:
        return pl.DataFrame(schema=schema)
    # one int64 sort key: ((thread × extent + t − t0) × 2 + kind) × (2·D + 1) + order + D
    # (kind: 0 end, 1 start; order: −depth for an end, depth for a start; thread: dense rank from 1)
    t0, t1, dmax = o.select(
        pl.col("start_ns").min().alias("a"),
        pl.col("end_ns").max().alias("b"),
        pl.col("depth").max().cast(pl.Int64()).alias("c"),
    ).row(0)
    o = o.with_columns(pl.struct("pid", "tid").rank("dense").cast(pl.Int64()).alias("_g"))
    span, dm = int(t1) - int(t0) + 1, int(dmax or 0)
    dd = 2 * dm + 1
    if (int(o["_g"].max() or 0) + 1) * span * 2 * dd >= 2**62:  # type: ignore[arg-type]  # pragma: no cover
        return _op_segments_sorted(o, ops, schema, names)
    x = (pl.col("_g") * span - int(t0)) * 2
    d = pl.col("depth").cast(pl.Int64())
    ev = pl.concat(
        [
            o.select(((x + pl.col("start_ns") * 2 + 1) * dd + d + dm).alias("_key"), pl.col("op_id").alias("_lab")),
            o.select(((x + pl.col("end_ns") * 2) * dd - d + dm).alias("_key"), pl.col("parent_id").alias("_lab")),
        ]
    )
    ev = ev[ev["_key"].arg_sort()]
    xt = pl.col("_key") // dd // 2  # thread × extent + t − t0
    seg = ev.select((xt // span).alias("_g"), (xt % span + int(t0)).alias("s"), "_lab")
    del ev
    nxt = pl.when(pl.col("_g") == pl.col("_g").shift(-1)).then(pl.col("s").shift(-1))
    seg = seg.with_columns(nxt.alias("e")).filter(pl.col("_lab").is_not_null() & (pl.col("e") > pl.col("s")))
    thr = o.select("pid", "tid", "_g").unique("_g").sort("_g")  # rank r is row r − 1
    at = seg["_g"] - 1
    return pl.DataFrame(
        [
            thr["pid"].gather(at),
            thr["tid"].gather(at),
            seg["s"],
            seg["e"],
            _op_names(ops, seg["_lab"]) if names else seg["_lab"].alias("op"),
        ]
    ).cast(schema)  # type: ignore[arg-type]


def _packable_threads(ops: pl.DataFrame, threads: pl.DataFrame) -> bool:
    """Thread ids without nulls that pack into one int64 in (pid, tid) order: pid·2³¹ + tid with
    |pid| < 2³¹ and 0 ≤ tid < 2³¹ (then :func:`op_segments` runs as two queries)."""
    for f in (ops, threads):
        if f["pid"].null_count() or f["tid"].null_count():
            return False
        lims = (f["pid"].min(), f["pid"].max(), f["tid"].min(), f["tid"].max())
        if not all(isinstance(v, int) for v in lims):
            return False
        p0, p1, t0, t1 = lims
        if not (-(2**31) < p0 and p1 < 2**31 and 0 <= t0 and t1 < 2**31):  # type: ignore[operator]
            return False
    return True


def _op_segments_two_queries(
    ops: pl.DataFrame, threads: pl.DataFrame, schema: dict[str, pl.DataType], names: bool
) -> pl.DataFrame:
    """:func:`op_segments` for packable thread ids (:func:`_packable_threads`): the ops of the
    threads with their thread's dense rank in one query, the sorted events, their stretches and
    the thread table in one more (the same sort key, the same arg_sort as the general path)."""
    key = pl.col("pid").cast(pl.Int64()) * 2**31 + pl.col("tid").cast(pl.Int64())
    want = threads["pid"].cast(pl.Int64()) * 2**31 + threads["tid"].cast(pl.Int64())
    o = (
        ops.lazy()
        .select("op_id", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id")
        .filter(key.is_in(pl.lit(want).implode()))
        .with_columns((key.unique().sort().search_sorted(key, side="left").cast(pl.Int64()) + 1).alias("_g"))
        .collect(engine="in-memory")
    )
    if o.height == 0:
        return pl.DataFrame(schema=schema)
    t0, t1, dmax, gmax = (_int(x) for x in (o["start_ns"].min(), o["end_ns"].max(), o["depth"].max(), o["_g"].max()))
    span, dm = t1 - t0 + 1, dmax
    dd = 2 * dm + 1
    if (gmax + 1) * span * 2 * dd >= 2**62:  # pragma: no cover
        return _op_segments_sorted(o, ops, schema, names)
    x = (pl.col("_g") * span - t0) * 2
    d = pl.col("depth").cast(pl.Int64())
    ol = o.lazy()
    ev = pl.concat(
        [
            ol.select(((x + pl.col("start_ns") * 2 + 1) * dd + d + dm).alias("_key"), pl.col("op_id").alias("_lab")),
            ol.select(((x + pl.col("end_ns") * 2) * dd - d + dm).alias("_key"), pl.col("parent_id").alias("_lab")),
        ]
    ).select(pl.all().gather(pl.col("_key").arg_sort()))
    xt = pl.col("_key") // dd // 2  # thread × extent + t − t0
    nxt = pl.when(pl.col("_g") == pl.col("_g").shift(-1)).then(pl.col("s").shift(-1))
    seg_q = (
        ev.select((xt // span).alias("_g"), (xt % span + t0).alias("s"), "_lab")
        .with_columns(nxt.alias("e"))
        .filter(pl.col("_lab").is_not_null() & (pl.col("e") > pl.col("s")))
    )
    thr_q = ol.select("pid", "tid", "_g").unique("_g").sort("_g")  # rank r is row r − 1
    seg, thr = pl.collect_all([seg_q, thr_q], engine="in-memory")
    at = seg["_g"] - 1
    op = _op_names(ops, seg["_lab"]) if names else seg["_lab"].alias("op")
    cols = [take(thr["pid"], at), take(thr["tid"], at), seg["s"], seg["e"], op]
    return pl.DataFrame([c.cast(schema[c.name]) for c in cols])


def _int(v: object) -> int:
    return int(v) if isinstance(v, int) else 0


def _op_names(ops: pl.DataFrame, op_ids: pl.Series) -> pl.Series:
    from tracekit.analysis.metrics import positions

    return ops["name"].gather(positions(op_ids, ops["op_id"])).alias("op")


def op_labels(df: pl.DataFrame, ops: pl.DataFrame | None) -> pl.DataFrame:
    """``df`` with its ``op`` column of op ids (``op_segments(..., names=False)``) as op names."""
    if df.schema["op"] == pl.String():
        return df
    if ops is None or df.height == 0:
        return df.with_columns(pl.lit(None, dtype=pl.String()).alias("op"))
    return df.with_columns(_op_names(ops, df["op"]))


def _op_segments_sorted(
    o: pl.DataFrame, ops: pl.DataFrame, schema: dict[str, pl.DataType], names: bool
) -> pl.DataFrame:  # pragma: no cover - needs ~10^8 s of trace
    """:func:`op_segments` by a multi-column sort, when the packed key could overflow."""
    d = pl.col("depth").cast(pl.Int64())
    ev = pl.concat(
        [
            o.select(
                "pid",
                "tid",
                pl.col("start_ns").alias("t"),
                pl.lit(1).alias("_k"),
                d.alias("_o"),
                pl.col("op_id").alias("_lab"),
            ),
            o.select(
                "pid",
                "tid",
                pl.col("end_ns").alias("t"),
                pl.lit(0).alias("_k"),
                (-d).alias("_o"),
                pl.col("parent_id").alias("_lab"),
            ),
        ]
    ).sort("pid", "tid", "t", "_k", "_o")
    same = (pl.col("pid") == pl.col("pid").shift(-1)) & (pl.col("tid") == pl.col("tid").shift(-1))
    seg = ev.select("pid", "tid", pl.col("t").alias("s"), pl.when(same).then(pl.col("t").shift(-1)).alias("e"), "_lab")
    seg = seg.filter(pl.col("_lab").is_not_null() & (pl.col("e") > pl.col("s")))
    op = _op_names(ops, seg["_lab"]) if names else seg["_lab"].alias("op")
    return seg.with_columns(op).drop("_lab").cast(schema)  # type: ignore[arg-type]


def idle_pieces(win: pl.DataFrame, linked: pl.DataFrame) -> pl.DataFrame:
    """Idle stretches of each window: ``region_id, pid, tid, s, e`` = window minus the union of
    the region's linked activities (``linked``: region_id, start_ns, end_ns). The window holds
    all of its region's activities (tracekit/analysis/windows.py), so the gaps between the busy
    stretches, the head and the tail are the idle time."""
    return _idle_pieces_q(win, linked).collect(engine="in-memory")


def _idle_pieces_q(win: pl.DataFrame, linked: pl.DataFrame) -> pl.LazyFrame:
    """:func:`idle_pieces` as a lazy plan after the union (a step of the caller's query)."""
    b = union(linked, "region_id", "start_ns", "end_ns")
    w = win.lazy().select("region_id", "pid", "tid", pl.col("start_ns").alias("ws"), pl.col("end_ns").alias("we"))
    bq = b.lazy().join(w, on="region_id", how="inner", maintain_order="left")
    k = pl.col("region_id")
    first = (k != k.shift(1)).fill_null(True)
    last = (k != k.shift(-1)).fill_null(True)
    prev_e = pl.when(first).then(pl.col("ws")).otherwise(pl.col("e").shift(1))
    gaps = bq.select("region_id", "pid", "tid", prev_e.alias("s"), pl.col("s").alias("e"))  # heads included
    tails = bq.filter(last).select("region_id", "pid", "tid", pl.col("e").alias("s"), pl.col("we").alias("e"))
    empty = w.join(b.lazy().select("region_id").unique(), on="region_id", how="anti").select(
        "region_id", "pid", "tid", pl.col("ws").alias("s"), pl.col("we").alias("e")
    )
    out = pl.concat([x.cast({"s": pl.Int64(), "e": pl.Int64()}) for x in (gaps, tails, empty)])
    return out.filter(pl.col("e") > pl.col("s"))


def host_layers(
    launches: pl.DataFrame | None, ops: pl.DataFrame | None, threads: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(blocking calls, innermost-op stretches) on ``threads`` (pid, tid), computed once per analysis."""
    blocking, thr = host_threads(launches, ops, threads)
    return blocking, op_segments(ops, thr, names=False)  # op ids: the names of the stretches that matter come later


def host_threads(
    launches: pl.DataFrame | None, ops: pl.DataFrame | None, threads: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(blocking calls on ``threads``, the distinct threads ``pid, tid``): :func:`host_layers`
    before the op stretches, for a caller that builds those per time range."""
    thr = threads.drop_nulls().unique()
    return blocking_calls(launches, ops).join(thr, on=["pid", "tid"], how="semi"), thr


def ops_overlapping(ops: pl.DataFrame | None, lo: int | None, hi: int | None) -> pl.DataFrame | None:
    """The ops (the columns :func:`op_segments` reads) that overlap (``lo``, ``hi``): their stretches
    inside that range are those of all the ops (an op left out lies wholly before ``lo`` or after
    ``hi``, and the parent of an op kept is kept, since it holds it), so idle pieces inside the
    range split by them alike."""
    if ops is None:
        return None
    near = (pl.col("end_ns") > lo) & (pl.col("start_ns") < hi)
    cols = ("op_id", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id")
    return ops.lazy().filter(near).select(cols).collect(engine="in-memory")  # not the streaming default


def idle_causes(
    win: pl.DataFrame,
    linked: pl.DataFrame,
    launches: pl.DataFrame | None,
    ops: pl.DataFrame | None,
    host: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Idle pieces with their cause: ``region_id, s, e, cause, op, call, inst``.

    ``win``: region_id, pid, tid (the region's thread), start_ns, end_ns (the window),
    first_launch_ns, last_ns. ``linked``: region_id, start_ns, end_ns, launch_start_ns (optional).
    ``inst`` numbers the instance a piece belongs to (one blocking call, one op) for counts.
    """
    out_schema = {
        "region_id": pl.Int64(),
        "s": pl.Int64(),
        "e": pl.Int64(),
        "cause": pl.String(),
        "op": pl.String(),
        "call": pl.String(),
        "inst": pl.Int64(),
    }
    edges = win.lazy().select(
        "region_id",
        pl.coalesce("first_launch_ns", "first_ns", "start_ns").alias("_lo"),
        pl.coalesce("last_ns", "end_ns").alias("_hi"),
    )
    # one query: the idle pieces cut at the first launch and the last activity (edge 1 / 2)
    q = _idle_pieces_q(win, linked).join(edges, on="region_id")
    before = q.filter(pl.col("s") < pl.col("_lo")).with_columns(
        pl.col("e").clip(upper_bound=pl.col("_lo")), pl.lit(1).alias("_edge")
    )
    after = q.filter(pl.col("e") > pl.col("_hi")).with_columns(
        pl.col("s").clip(lower_bound=pl.col("_hi")), pl.lit(2).alias("_edge")
    )
    inner = q.with_columns(
        pl.col("s").clip(lower_bound=pl.col("_lo")),
        pl.col("e").clip(upper_bound=pl.col("_hi")),
        pl.lit(0).alias("_edge"),
    )
    p = (
        pl.concat([before, after, inner])
        .filter(pl.col("e") > pl.col("s"))
        .drop("_lo", "_hi")
        .with_columns(pl.col("_edge").cast(pl.Int8()))
        .collect(engine="in-memory")
    )
    if p.height == 0:  # (no idle piece: the splits and tags below would give this empty frame)
        return pl.DataFrame(schema=out_schema)
    del before, after, inner, q

    thr = ["pid", "tid"]
    blocking, segs = host if host is not None else host_layers(launches, ops, win.select(thr))
    in_b, p = split(p, blocking, thr, ["call", "op"])
    if "launch_start_ns" in linked.columns:
        lat_q = linked.lazy().select("region_id", pl.col("launch_start_ns").alias("s"), pl.col("start_ns").alias("e"))
        lat = union(lat_q.drop_nulls().filter(pl.col("e") > pl.col("s")).collect(engine="in-memory"), "region_id")
    else:
        lat = pl.DataFrame(schema={"region_id": pl.Int64(), "s": pl.Int64(), "e": pl.Int64()})
    in_l, p = split(p, lat, ["region_id"], [])
    del lat
    in_o, p = split(p, segs, thr, ["op"])
    in_o = op_labels(in_o, ops)

    def tag(df: pl.DataFrame, cause: str, off: int) -> pl.LazyFrame:
        c = (
            pl.when(pl.col("_edge") == 1)
            .then(pl.lit("before_first_launch"))
            .when(pl.col("_edge") == 2)
            .then(pl.lit("after_last_kernel"))
            .otherwise(pl.lit(cause))
        )
        cols = [pl.col(x) if x in df.columns else pl.lit(None, dtype=pl.String()).alias(x) for x in ("op", "call")]
        inst = (pl.col("_lj") + off) if "_lj" in df.columns else pl.lit(None, dtype=pl.Int64())
        return df.lazy().select("region_id", "s", "e", c.alias("cause"), *cols, inst.cast(pl.Int64()).alias("inst"))

    parts = [
        tag(in_b, "blocking", 0),
        tag(in_l, "launch_latency", 1 << 40),
        tag(in_o, "cpu_op", 2 << 40),
        tag(p, "outside_ops", 3 << 40),
    ]
    return pl.concat(parts).cast(out_schema).collect(engine="in-memory")  # type: ignore[arg-type]


def cause_totals(pieces: pl.DataFrame) -> pl.DataFrame:
    """Per region: ``idle_<cause>_ns`` for every cause (0 when absent) and their sum ``idle_causes_ns``."""
    wide = pieces.group_by("region_id").agg(
        *[(pl.col("e") - pl.col("s")).filter(pl.col("cause") == c).sum().alias(f"idle_{c}_ns") for c in CAUSES]
    )
    return wide.with_columns(pl.sum_horizontal(CAUSE_COLUMNS).alias("idle_causes_ns"))


def totals_and_culprits(pieces: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(:func:`cause_totals`, :func:`culprits`) of the pieces in two polars queries: the totals
    are summed from the culprit sums (integers: the same values as from the pieces, from a few
    hundred rows instead of every piece)."""
    sums = culprit_sums(pieces)
    tot, cul = pl.collect_all([_sum_totals(sums.lazy()), _ranked(sums.lazy())], engine="in-memory")
    return tot, cul


def sum_totals(sums: pl.DataFrame) -> pl.DataFrame:
    """:func:`cause_totals` from culprit sums (:func:`culprit_sums`: ``region_id, cause, idle_ns``)."""
    return _sum_totals(sums.lazy()).collect(engine="in-memory")


def _sum_totals(sums: pl.LazyFrame) -> pl.LazyFrame:
    wide = sums.group_by("region_id").agg(
        *[pl.col("idle_ns").filter(pl.col("cause") == c).sum().alias(f"idle_{c}_ns") for c in CAUSES]
    )
    return wide.with_columns(pl.sum_horizontal(CAUSE_COLUMNS).alias("idle_causes_ns"))


def culprits(pieces: pl.DataFrame, key: str = "region_id") -> pl.DataFrame:
    """Per ``key`` value and (cause, op, call): ``idle_ns`` and ``count`` (distinct call / op
    instances; stretches for causes without one), largest first, ``rank`` from 1."""
    return ranked(culprit_sums(pieces, key), key)


def culprit_sums(pieces: pl.DataFrame, key: str = "region_id") -> pl.DataFrame:
    """:func:`culprits` before its order and ranks (unordered rows): for pieces taken a block of
    ``key`` values at a time, the blocks' sums concatenated are the sums of all the pieces."""
    return pieces.group_by(key, "cause", "op", "call").agg(
        (pl.col("e") - pl.col("s")).sum().alias("idle_ns"),
        pl.when(pl.col("inst").is_null().all())
        .then(pl.len())
        .otherwise(pl.col("inst").n_unique())
        .cast(pl.Int64())
        .alias("count"),
    )


def ranked(g: pl.DataFrame, key: str = "region_id") -> pl.DataFrame:
    """Culprit sums (:func:`culprit_sums`) in :func:`ranked_order` with their ``rank`` per ``key`` from 1."""
    return _ranked(g.lazy(), key).collect(engine="in-memory")


def _ranked(g: pl.LazyFrame, key: str = "region_id") -> pl.LazyFrame:
    """:func:`ranked` as a lazy plan."""
    return ranked_order(g, key).with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over(key).alias("rank"))


def ranked_order(g: _Frame, key: str = "region_id") -> _Frame:
    """Culprit rows in their order: by ``key``, largest ``idle_ns`` first, then cause, op, call
    (a total order: those are the group keys)."""
    return g.sort(
        [key, "idle_ns", "cause", "op", "call"], descending=[False, True, False, False, False], nulls_last=True
    )


def describe(cause: pl.Expr, op: pl.Expr, call: pl.Expr) -> pl.Expr:
    """One phrase per culprit: ``blocking hipMemcpyWithStream in aten::to``, ``host in aten::mm``…"""
    in_op = pl.when(op.is_not_null()).then(pl.format(" in {}", op)).otherwise(pl.lit(""))
    return (
        pl.when(cause == "blocking")
        .then(pl.format("blocking {}{}", call, in_op))
        .when(cause == "launch_latency")
        .then(pl.lit("launch latency (launched, not yet started)"))
        .when(cause == "cpu_op")
        .then(pl.format("host busy in {}", op))
        .when(cause == "outside_ops")
        .then(pl.lit("host outside any op (Python, scheduler)"))
        .when(cause == "before_first_launch")
        .then(pl.format("before the first launch{}", in_op))
        .otherwise(pl.format("after the last kernel{}", in_op))
    )
