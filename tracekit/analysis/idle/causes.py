"""Idle time by cause: every idle ns of a region's window gets exactly one cause (docs/analysis.md).

Idle = the window (:mod:`tracekit.analysis.regions.windows`) minus the union of the region's device work.
Each idle stretch is cut where the host's state changes and each piece gets one cause, first
match wins:

``before_first_launch`` / ``after_last_kernel`` (e): before the region's first launch call or
    after its last device activity ends;
``blocking`` (b): the region's thread is inside a blocking synchronisation or copy call
    (:data:`BLOCKING`); named by the call and the outermost op that issued it;
``cold_start`` (f): the region's thread is inside a runtime launch call that itself blocks for
    long (:func:`cold_launch`: lazy module loading, JIT, autotuning), named by the call and its op;
``launch_latency`` (c): some launch call of the region has returned and its work has not started
    while its stream was free (the device idle: waits while it ran other work are ``queued``, above);
``dependency``: launched work waits, the device idle, but not for launch latency: behind earlier
    work on its stream still to run, or on an event (``cudaStreamWaitEvent``; :func:`launch_free`);
``launch_call`` (c'): the host is inside one of the region's launch calls (launch overhead);
``cpu_op`` (a): the region's thread is running a CPU op; named by the innermost op;
``outside_ops`` (d): the host is outside any op (Python, scheduler, tokenisation).

Before any cause, the window's time without the region's own work is split by the device
(the one that ran most of the region's work): where it runs **other work** (other regions'
kernels, the previous iteration's tail) the time is not idle. Those pieces are ``queued`` while
some of the region's launched work waits to start (launch call end → its start), else
``other_work``; both are named by the innermost region (or unattributed reason) of the work that
ran, and neither is an idle cause (:data:`OTHER`). What is left is idle: the device ran nothing.

The pieces partition the idle time, so the causes add up to ``idle_ns`` exactly; the analysis
checks that on every region (``idle_conserved``). The region's thread is its own (pid, tid), or
for a region without one (the whole-trace region of shape inference) the thread that made most
of its launches. Everything is interval arithmetic on sorted int64 columns: as-of joins find the
host intervals that overlap an idle stretch, no loop over events (tracekit/analysis/idle/intervals.py).
"""

from __future__ import annotations

from typing import TypeVar

import polars as pl

from tracekit.analysis.idle.intervals import disjoint, split, union
from tracekit.analysis.regions.blocks import CHUNK_ROWS
from tracekit.analysis.idle.host_segments import op_labels
from tracekit.tables.cases import first
from tracekit.tables.dictstr import cut_long
from tracekit.tables.gather import take

# Runtime/driver calls that block the host until the device (or a copy) is done.
BLOCKING = (
    r"(?i)^(cuda|hip)(Stream|Device|Event|Ctx)Synchronize|^cu(Stream|Ctx|Event)Synchronize"
    r"|^(cuda|hip)Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol|WithStream|DtoH|HtoD|DtoD)?(?:_v2)?$"
    r"|^cuMemcpy(?:DtoH|HtoD|DtoD|2D|3D|Peer)?(?:_v2)?$|^(cuda|hip)Free(Host)?$|^cuMemFree"
)
# Runtime/driver calls that make a stream wait on an event: the stream's next work depends on it.
EVENT_WAIT = r"(?i)^(cuda|hip|cu)StreamWaitEvent"
# Runtime/driver calls that launch device work (kernels, graphs).
LAUNCH = r"(?i)^(cuda|hip|cu)\w*Launch"
# A launch call is a cold start when its own duration is at least COLD_START_MIN_NS and at least
# COLD_START_FACTOR times the median of that thread's ordinary launch calls (those shorter than
# COLD_START_MIN_NS; docs/analysis.md, "Cold starts").
COLD_START_MIN_NS = 5_000_000
COLD_START_FACTOR = 100
CAUSES = (
    "blocking",
    "cold_start",
    "launch_latency",
    "dependency",
    "launch_call",
    "cpu_op",
    "outside_ops",
    "before_first_launch",
    "after_last_kernel",
)
CAUSE_COLUMNS = [f"idle_{c}_ns" for c in CAUSES]
# Window time the device spent on work that is not the region's: not idle (module docstring).
OTHER = ("queued", "other_work")
# The culprit rows of other work: one per (region, owner of the work), both kinds together.
BUSY_OTHER = "busy_other"
_Frame = TypeVar("_Frame", pl.DataFrame, pl.LazyFrame)


def cold_launch() -> pl.Expr:
    """Whether a row of the launches table (``name, pid, tid, start_ns, end_ns``) is a cold-start
    launch: a launch call (:data:`LAUNCH`) lasting at least :data:`COLD_START_MIN_NS` and at least
    :data:`COLD_START_FACTOR` × the median of its thread's ordinary launch calls (shorter than
    that; none: 0). The same rows come out of the whole table and of the rows this expression and
    :data:`BLOCKING` kept (the dataset read, tracekit/analysis/store/derived.py): the kept launch
    calls are all long, so their thread's ordinary median is then none."""
    dur = pl.col("end_ns") - pl.col("start_ns")
    launch = pl.col("name").str.contains(LAUNCH).fill_null(False)
    ordinary = dur.filter(launch & (dur < COLD_START_MIN_NS)).median().over("pid", "tid")
    return launch & (dur >= COLD_START_MIN_NS) & (dur >= COLD_START_FACTOR * ordinary.fill_null(0))


def blocking_calls(launches: pl.DataFrame | None, ops: pl.DataFrame | None) -> pl.DataFrame:
    """Blocking runtime calls: ``pid, tid, s, e, call, op, cold`` (op: the outermost op holding the
    call; cold: a cold-start launch call, :func:`cold_launch`, rather than a synchronisation)."""
    schema = {
        "pid": pl.Int64(),
        "tid": pl.Int64(),
        "s": pl.Int64(),
        "e": pl.Int64(),
        "call": pl.String(),
        "op": pl.String(),
        "cold": pl.Boolean(),
    }
    if launches is None or launches.height == 0:
        return pl.DataFrame(schema=schema)
    b_q = launches.lazy().with_columns(cold_launch().alias("cold"))
    b_q = b_q.filter(pl.col("name").str.contains(BLOCKING) | pl.col("cold"))
    b_q = b_q.select(
        "pid",
        "tid",
        pl.col("start_ns").alias("s"),
        pl.col("end_ns").alias("e"),
        pl.col("name").alias("call"),
        "cold",
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


def device_work(acts: pl.DataFrame, regions: pl.DataFrame) -> pl.DataFrame:
    """Every device activity as the work a window may see running: ``device, s, e, owner`` made
    disjoint per device (:func:`disjoint`: each start clipped to the latest earlier end, so each
    row is one activity seen running), ``owner`` (categorical) = the name of the activity's
    innermost region (with its step when the name repeats: "## backward ## (step 2)"), else the short
    form of its unattributed reason ("previous-iteration tail"), else ``unattributed``."""
    dev = pl.col("device").fill_null(-1) if "device" in acts.columns else pl.lit(0, dtype=pl.Int64())
    q = acts.lazy().select(
        "region_id",
        dev.cast(pl.Int64()).alias("device"),
        pl.col("start_ns").alias("s"),
        pl.col("end_ns").alias("e"),
        "unattributed_reason",
    )
    named = cut_long(pl.col("name").cast(pl.String()))  # a repeated 2 MB name is not copied per row
    if "step" in regions.columns:  # "## backward ## (step 2)": which iteration's
        # a repeated name only, and not one that says its step ("tk:decode step=3")
        bare = pl.col("step").is_not_null() & (pl.len().over("name") > 1) & ~named.str.contains("(?i)step")
        named = pl.when(bare).then(pl.format("{} (step {})", named, "step")).otherwise(named)
    names = regions.lazy().select("region_id", named.alias("_rname"))
    reason = pl.col("unattributed_reason").cast(pl.String()).str.split(" (").list.first()
    q = q.join(names, on="region_id", how="left").select(
        "device",
        "s",
        "e",
        pl.coalesce("_rname", reason, pl.lit("unattributed")).cast(pl.Categorical()).alias("owner"),
    )
    return disjoint(q, by=("device",))


def _idle_pieces_q(win: pl.DataFrame, linked: pl.DataFrame) -> pl.LazyFrame:
    """Idle stretches of each window: ``region_id, pid, tid, s, e`` = window minus the union of
    the region's linked activities (``linked``: region_id, start_ns, end_ns). The window holds
    all of its region's activities (tracekit/analysis/regions/windows.py), so the gaps between the busy
    stretches, the head and the tail are the idle time. A lazy plan after the union."""
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


def host_threads(
    launches: pl.DataFrame | None, ops: pl.DataFrame | None, threads: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(blocking calls on ``threads``, the distinct threads ``pid, tid``), computed once per
    analysis; the caller builds the innermost-op stretches of those threads per time range."""
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
    ops: pl.DataFrame | None,
    host: tuple[pl.DataFrame, pl.DataFrame],
    other: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Idle pieces with their cause: ``region_id, s, e, cause, op, call, inst``.

    ``win``: region_id, pid, tid (the region's thread), start_ns, end_ns (the window),
    first_launch_ns, last_ns, and ``device`` (the region's device) when ``other`` is given.
    ``linked``: region_id, start_ns, end_ns, launch_start_ns and launch_end_ns (optional).
    ``host``: the blocking calls and the innermost-op stretches (op ids) of the windows' threads.
    ``other``: :func:`device_work`; its pieces come first, with cause ``queued`` or ``other_work``
    and ``op`` = the owner of the work that ran (:data:`OTHER`: not idle).
    ``inst`` numbers the instance a piece belongs to (one blocking call, one op, one activity).
    """
    p = _edge_pieces(win, linked)
    if p.height == 0:  # (no idle piece: the splits and tags below would give this empty frame)
        return pl.DataFrame(schema=_PIECE_SCHEMA)
    thr = ["pid", "tid"]
    waits = _launch_waits(linked)
    busy: list[pl.LazyFrame] = []
    if other is not None and other.height and "device" in win.columns:
        dev = win.select("region_id", pl.col("device").fill_null(-2).cast(pl.Int64()))  # -2: no work, no device
        p = p.join(dev, on="region_id", how="left")
        in_w, p = split(p, other, ["device"], ["owner"])
        in_q, in_w = split(in_w.rename({"_lj": "_act"}), waits, ["region_id"], [])
        busy = [_tag_other(in_q, "queued", 4 << 40), _tag_other(in_w, "other_work", 4 << 40)]
    blocking, segs = host
    in_b, p = split(p, blocking, thr, ["call", "op", "cold"])
    in_l, p = split(p, _launch_waits(linked, free=True), ["region_id"], [])
    in_d, p = split(p, waits, ["region_id"], [])
    in_c, p = split(p, _launch_calls(linked), ["region_id"], [])
    in_o, p = split(p, segs, thr, ["op"])
    in_o = op_labels(in_o, ops)
    parts = [
        _tag(
            in_b, pl.when(pl.col("cold").fill_null(False)).then(pl.lit("cold_start")).otherwise(pl.lit("blocking")), 0
        ),
        _tag(in_l, "launch_latency", 1 << 40),
        _tag(in_d, "dependency", 6 << 40),
        _tag(in_c, "launch_call", 5 << 40),
        _tag(in_o, "cpu_op", 2 << 40),
        _tag(p, "outside_ops", 3 << 40),
        *busy,
    ]
    return pl.concat(parts).cast(_PIECE_SCHEMA).collect(engine="in-memory")  # type: ignore[arg-type]


_PIECE_SCHEMA = {
    "region_id": pl.Int64(),
    "s": pl.Int64(),
    "e": pl.Int64(),
    "cause": pl.String(),
    "op": pl.String(),
    "call": pl.String(),
    "inst": pl.Int64(),
}


def _edge_pieces(win: pl.DataFrame, linked: pl.DataFrame) -> pl.DataFrame:
    """The idle pieces of each window cut at the first launch and the last activity, in one query:
    ``_edge`` 1 before the first launch, 2 after the last activity, 0 between."""
    edges = win.lazy().select(
        "region_id",
        pl.coalesce("first_launch_ns", "first_ns", "start_ns").alias("_lo"),
        pl.coalesce("last_ns", "end_ns").alias("_hi"),
    )
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
    return (
        pl.concat([before, after, inner])
        .filter(pl.col("e") > pl.col("s"))
        .drop("_lo", "_hi")
        .with_columns(pl.col("_edge").cast(pl.Int8()))
        .collect(engine="in-memory")
    )


def _launch_calls(linked: pl.DataFrame) -> pl.DataFrame:
    """Per region, the union of its activities' launch calls (start → end): the host launching."""
    if not {"launch_start_ns", "launch_end_ns"} <= set(linked.columns):
        return pl.DataFrame(schema={"region_id": pl.Int64(), "s": pl.Int64(), "e": pl.Int64()})
    q = linked.lazy().select("region_id", pl.col("launch_start_ns").alias("s"), pl.col("launch_end_ns").alias("e"))
    return union(q.drop_nulls().filter(pl.col("e") > pl.col("s")).collect(engine="in-memory"), "region_id")


def launch_free(acts: pl.DataFrame, launches: pl.DataFrame | None) -> pl.DataFrame:
    """``act_id, free_ns`` of each launched activity: from when its wait is launch latency — its
    launch call's end, or the end of the earlier work on its (device, stream) when later; its own
    start (no latency at all) when it waits on an event: the launching thread called
    :data:`EVENT_WAIT` after the launch of the stream's previous activity (or, for the stream's
    first, at any time before). Its wait before ``free_ns`` is a dependency, not latency."""
    need = {"launch_end_ns", "launch_start_ns", "device", "stream"}
    if not need <= set(acts.columns):
        return pl.DataFrame(schema={"act_id": pl.Int64(), "free_ns": pl.Int64()})
    # the launching threads' event waits, if any (without them, no launch columns but the end)
    waits = (
        launches is not None
        and launches.height > 0
        and "launch_pid" in acts.columns
        and bool(launches["name"].str.contains(EVENT_WAIT).any())
    )
    s = (
        acts.lazy()
        .select(
            "act_id",
            pl.col("device").fill_null(-1),
            pl.col("stream").fill_null(-1),
            "start_ns",
            "end_ns",
            "launch_end_ns",
            *(["launch_start_ns"] if waits else []),
            *[pl.col(c).fill_null(-1) for c in ("launch_pid", "launch_tid") if waits],
        )
        .sort("device", "stream", "start_ns", "act_id")
        .with_columns(
            _prev_end(acts),
            *([pl.col("launch_start_ns").shift(1).over("device", "stream").alias("_prev_launch")] if waits else []),
        )
        .filter(pl.col("launch_end_ns").is_not_null())
    )
    dep = pl.lit(False)
    if waits and launches is not None:
        ev = (
            launches.lazy()
            .filter(pl.col("name").str.contains(EVENT_WAIT))
            .select(
                pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"), pl.col("start_ns").alias("_ev")
            )
            .sort("_ev")
        )
        s = s.sort("launch_start_ns").join_asof(
            ev,
            left_on="launch_start_ns",
            right_on="_ev",
            by=["launch_pid", "launch_tid"],
            strategy="backward",
            check_sortedness=False,
        )
        dep = pl.col("_ev").is_not_null() & (
            pl.col("_prev_launch").is_null() | (pl.col("_ev") > pl.col("_prev_launch"))
        )
    free = pl.max_horizontal("launch_end_ns", pl.col("_prev_end").fill_null(pl.col("launch_end_ns")))
    free = pl.when(dep).then(pl.col("start_ns")).otherwise(pl.min_horizontal(free, "start_ns"))
    return s.select("act_id", free.cast(pl.Int64()).alias("free_ns")).collect(engine="in-memory")


def _prev_end(acts: pl.DataFrame) -> pl.Expr:
    """Over rows in (device, stream, start) order: the latest end of the earlier rows of the same
    (device, stream). On a big trace (over :data:`CHUNK_ROWS` activities), where one int64 cannot
    overflow, each (device, stream) is shifted past the earlier ones' times and one running maximum
    runs over all rows (no per-group window, whose groups were its largest transient here)."""
    window = pl.col("end_ns").cum_max().shift(1).over("device", "stream").alias("_prev_end")
    ends = acts["end_ns"]
    if acts.height <= CHUNK_ROWS or ends.null_count() == ends.len():  # small: the window is cheap
        return window
    t0, t1 = int(ends.min()), int(ends.max())  # type: ignore[arg-type]
    groups = acts.select(pl.struct(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1)).n_unique()).item()
    if groups * (t1 - t0 + 1) >= 2**62:
        return window
    new = (pl.col("device") != pl.col("device").shift(1)) | (pl.col("stream") != pl.col("stream").shift(1))
    off = (new.fill_null(True).cum_sum().cast(pl.Int64()) * (t1 - t0 + 1)) - t0
    prev = ((pl.col("end_ns") + off).cum_max().shift(1) - off).cast(ends.dtype)
    return pl.when(new.fill_null(True)).then(None).otherwise(prev).alias("_prev_end")


def _launch_waits(linked: pl.DataFrame, free: bool = False) -> pl.DataFrame:
    """Per region, the union of the stretches from each activity's launch call's end (its start
    where the end is unknown) to the activity's start: the work was enqueued, not yet running.
    ``free``: only the stretches from its ``free_ns`` (:func:`launch_free`), its launch latency."""
    if "launch_start_ns" not in linked.columns:
        return pl.DataFrame(schema={"region_id": pl.Int64(), "s": pl.Int64(), "e": pl.Int64()})
    sent = (
        pl.coalesce("launch_end_ns", "launch_start_ns")
        if "launch_end_ns" in linked.columns
        else pl.col("launch_start_ns")
    )
    if free and "free_ns" in linked.columns:
        sent = pl.coalesce("free_ns", sent)
    lat_q = linked.lazy().select("region_id", sent.alias("s"), pl.col("start_ns").alias("e"))
    return union(lat_q.drop_nulls().filter(pl.col("e") > pl.col("s")).collect(engine="in-memory"), "region_id")


def _tag(df: pl.DataFrame, cause: str | pl.Expr, off: int) -> pl.LazyFrame:
    """Pieces with their cause (the edges' own causes first), op, call and instance number."""
    c = first(
        (pl.col("_edge") == 1, pl.lit("before_first_launch")),
        (pl.col("_edge") == 2, pl.lit("after_last_kernel")),
        otherwise=pl.lit(cause) if isinstance(cause, str) else cause,
    )
    cols = [pl.col(x) if x in df.columns else pl.lit(None, dtype=pl.String()).alias(x) for x in ("op", "call")]
    inst = (pl.col("_lj") + off) if "_lj" in df.columns else pl.lit(None, dtype=pl.Int64())
    return df.lazy().select("region_id", "s", "e", c.alias("cause"), *cols, inst.cast(pl.Int64()).alias("inst"))


def _tag_other(df: pl.DataFrame, cause: str, off: int) -> pl.LazyFrame:
    """Pieces of other work with their cause, ``op`` = the owner of the work, and the activity as instance."""
    return df.lazy().select(
        "region_id",
        "s",
        "e",
        pl.lit(cause).alias("cause"),
        pl.col("owner").cast(pl.String()).alias("op"),
        pl.lit(None, dtype=pl.String()).alias("call"),
        (pl.col("_act") + off).cast(pl.Int64()).alias("inst"),
    )


def _other_sums() -> list[pl.Expr]:
    """``other_busy_ns`` (the device ran other work) and ``queued_ns`` (its part while the region's
    launched work waited) from culprit sums."""
    return [
        pl.col("idle_ns").filter(pl.col("cause").is_in(OTHER)).sum().alias("other_busy_ns"),
        pl.col("idle_ns").filter(pl.col("cause") == "queued").sum().alias("queued_ns"),
    ]


def cause_totals(pieces: pl.DataFrame) -> pl.DataFrame:
    """Per region: ``idle_<cause>_ns`` for every cause (0 when absent), their sum ``idle_causes_ns``,
    and the other work's ``other_busy_ns``, ``queued_ns``."""
    return sum_totals(pieces.with_columns((pl.col("e") - pl.col("s")).alias("idle_ns")))


def totals_and_culprits(pieces: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(:func:`cause_totals`, :func:`culprits`) of the pieces in two polars queries: the totals
    are summed from the culprit sums (integers: the same values as from the pieces, from a few
    hundred rows instead of every piece)."""
    sums = culprit_sums(pieces)
    tot, cul = pl.collect_all([sum_totals(sums.lazy()), ranked(sums.lazy())], engine="in-memory")
    return tot, cul


def sum_totals(sums: _Frame) -> _Frame:
    """:func:`cause_totals` from culprit sums (:func:`culprit_sums`: ``region_id, cause, idle_ns``);
    a lazy plan stays one."""
    wide = sums.group_by("region_id").agg(
        *[pl.col("idle_ns").filter(pl.col("cause") == c).sum().alias(f"idle_{c}_ns") for c in CAUSES],
        *_other_sums(),
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


def ranked(g: _Frame, key: str = "region_id") -> _Frame:
    """Culprit sums (:func:`culprit_sums`) in :func:`ranked_order` with their ``rank`` per ``key``
    from 1; a lazy plan stays one."""
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
    texts = {
        "blocking": pl.format("blocking {}{}", call, in_op),
        "cold_start": pl.format("cold start: {} blocked (lazy loading, JIT or autotuning){}", call, in_op),
        "launch_latency": pl.lit("launch latency (launched, not yet started)"),
        "dependency": pl.lit("launched work waiting on a stream or event dependency"),
        "launch_call": pl.lit("host in launch calls"),
        "cpu_op": pl.format("host busy in {}", op),
        "outside_ops": pl.lit("host outside any op (Python, scheduler)"),
        "before_first_launch": pl.format("before the first launch{}", in_op),
    }
    return first(*((cause == k, v) for k, v in texts.items()), otherwise=pl.format("after the last kernel{}", in_op))
