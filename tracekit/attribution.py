"""Attribution: each device activity → its launch → the launching op → the innermost enclosing
CPU-side region (and, for totals, every enclosing region).

The links, in order (docs/attribution.md says why each one):

1. activity → launch by ``correlation`` (held for 100 % of device events in every real trace
   checked). A CUDA/HIP graph launch shares one correlation with every kernel of its replay, so
   all those kernels land on the graph launch and its region.
2. launch → op by the launch's External id (validated: same pid/tid, the op encloses the launch
   in time), else by time nesting: the innermost op on the launch's thread whose [start, end]
   holds the launch start (External id was broken in traces from late 2023 to Feb 2024).
3. launch → region: the innermost ``user_annotation``/``nvtx`` region on the launch's thread that
   holds the launch start — the launch time, never the kernel's device time (kernels run after
   their CPU region ends). A launch from a thread with no enclosing region (e.g. autograd's)
   goes through its *forward thread*: the thread whose ops share its ops' autograd sequence
   numbers and started them first; the region of that thread at the launch time is the one that
   issued the work (it is blocked in ``backward()`` there).

CPU-only traces (no device activity): leaf CPU ops (ops with no child op) play the kernels' role.
Everything is vectorised polars (joins, as-of joins); the only Python loops run over nesting
levels, never over rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from tracekit import schema
from tracekit.errors import AnalysisError
from tracekit.trace import Trace

REASON_NO_LAUNCH: Final = "no launch with this correlation"
REASON_OUTSIDE: Final = "launch outside any region"
REASON_OTHER_THREAD: Final = "launched from a thread with no enclosing region"
REASON_NO_REGIONS: Final = "trace has no CPU-side regions"
REASONS: Final = (REASON_NO_LAUNCH, REASON_OUTSIDE, REASON_OTHER_THREAD, REASON_NO_REGIONS)

OP_LINK_EXTERNAL: Final = "external id"
OP_LINK_TIME: Final = "time nesting"
OP_LINK_SELF: Final = "self"  # CPU-only traces: the activity is the op
VIA_THREAD: Final = "launch thread"
VIA_FORWARD: Final = "forward thread"

CPU_REGION_KINDS: Final = (schema.REGION_USER, schema.REGION_NVTX)

ACTIVITY_COLUMNS: Final[dict[str, pl.DataType]] = {
    "act_id": pl.Int64(),
    "kind": pl.String(),
    "name": pl.String(),
    "device": pl.Int64(),
    "stream": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "correlation": pl.Int64(),
    "graph_id": pl.Int64(),
    "launch_name": pl.String(),
    "launch_pid": pl.Int64(),
    "launch_tid": pl.Int64(),
    "launch_start_ns": pl.Int64(),
    "launch_end_ns": pl.Int64(),
    "op_id": pl.Int64(),
    "op_name": pl.String(),
    "op_link": pl.String(),
    "region_id": pl.Int64(),
    "region_name": pl.String(),
    "region_via": pl.String(),
    "unattributed_reason": pl.String(),
}


@dataclass(frozen=True)
class Attribution:
    """Result of :func:`attribute`.

    ``activities``: one row per device activity (``trace.kernels`` row; ``act_id`` = its row
    position) or, when ``cpu_only``, per leaf CPU op (``act_id`` = ``op_id``); columns
    :data:`ACTIVITY_COLUMNS`. ``region_id`` is the innermost enclosing CPU region (null when
    unattributed; then ``unattributed_reason`` says why).
    ``region_links``: (act_id, region_id, level) for every enclosing region of every attributed
    activity; level 0 is the innermost, 1 its parent, ...
    ``region_tree``: CPU regions with ``parent_id`` (the effective parent: the same-thread parent,
    or for a top-level region on a thread with a forward thread, the forward-thread region that
    encloses it) and ``via``.
    ``thread_links``: (pid, tid) → forward (pid, fwd_tid) with the number of matched sequence numbers.
    ``total_count`` / ``total_dur_ns``: counted straight from the source table, before any join,
    so :func:`check_conservation` can compare against them.
    """

    activities: pl.DataFrame
    region_links: pl.DataFrame
    cpu_only: bool
    total_count: int
    total_dur_ns: int
    region_tree: pl.DataFrame = field(default_factory=pl.DataFrame)
    thread_links: pl.DataFrame = field(default_factory=pl.DataFrame)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def attributed(self) -> pl.DataFrame:
        return self.activities.filter(pl.col("region_id").is_not_null())

    @property
    def unattributed(self) -> pl.DataFrame:
        return self.activities.filter(pl.col("region_id").is_null())


def attribute(trace: Trace) -> Attribution:
    """Attribute every device activity (or leaf CPU op in a CPU-only trace) of ``trace`` to the
    innermost CPU-side region that launched it. Pure; times in ns. See the module docstring."""
    cpu_only = trace.is_cpu_only
    regions = cpu_regions(trace.regions)
    thread_links = forward_threads(trace.ops, regions)
    tree = region_tree(regions, thread_links)
    if cpu_only:
        acts = _leaf_op_activities(trace.ops)
        key = "act_id"
        lau = acts.select("act_id", "launch_pid", "launch_tid", "launch_start_ns")
    else:
        acts = _device_activities(trace.kernels)
        key = "correlation"
        lau = _launches(trace.launches, acts)
        lau = lau.join(launch_ops(lau, trace.ops), on="correlation", how="left")
    total_count = acts.height
    total_dur = int(acts["dur_ns"].sum() or 0)
    found = _launch_regions(lau, key, regions, thread_links)
    lau = found if cpu_only else lau.drop("_lext").join(found, on=key, how="left")
    # The one join at activity scale: both sides sorted on the key take polars' merge path.
    acts = acts.sort(key).join(lau.sort(key), on=key, how="left")
    acts = acts.with_columns(_reason(acts, regions))
    acts = acts.select([pl.col(c).cast(t) for c, t in ACTIVITY_COLUMNS.items()]).sort("act_id")
    links = _region_links(acts, tree)
    stats = {
        "activities": acts.height,
        "attributed": int(acts["region_id"].is_not_null().sum()),
        "op_link": dict(acts.group_by("op_link").len().iter_rows()),
        "region_via": dict(acts.group_by("region_via").len().iter_rows()),
    }
    return Attribution(acts, links, cpu_only, total_count, total_dur, tree, thread_links, stats)


# --- sources -----------------------------------------------------------------------------------


def cpu_regions(regions: pl.DataFrame) -> pl.DataFrame:
    """The CPU-side regions used for attribution (``user_annotation`` and ``nvtx``); the device
    projections (``gpu_user_annotation``) are left out."""
    return regions.filter(pl.col("kind").is_in(list(CPU_REGION_KINDS))).select(
        "region_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"
    )


def _device_activities(kernels: pl.DataFrame) -> pl.DataFrame:
    return kernels.with_row_index("act_id").select(
        pl.col("act_id").cast(pl.Int64), "kind", "name", "device", "stream", "start_ns", "end_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"), "correlation", "graph_id",
    )


def _launches(launches: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """One launch per correlation (a repeated correlation would count its kernels twice: the
    earliest call is kept), restricted to correlations some activity uses; sorted by correlation."""
    lau = (
        launches.filter(pl.col("correlation").is_not_null() & pl.col("correlation").is_in(acts["correlation"].drop_nulls().implode()))
        .sort(["correlation", "start_ns"])
    )
    lau = lau.filter(pl.col("correlation") != pl.col("correlation").shift(1).fill_null(pl.col("correlation") - 1))
    return lau.select(
        "correlation", pl.col("name").alias("launch_name"), pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"), pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"), pl.col("external_id").alias("_lext"),
    )


def _leaf_op_activities(ops: pl.DataFrame) -> pl.DataFrame:
    leaf = ops.filter(~pl.col("op_id").is_in(ops["parent_id"].drop_nulls().implode()))
    return leaf.select(
        pl.col("op_id").alias("act_id"), pl.lit(schema.KIND_CPU_OP).alias("kind"), "name",
        pl.lit(None, pl.Int64).alias("device"), pl.lit(None, pl.Int64).alias("stream"),
        "start_ns", "end_ns", (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        pl.lit(None, pl.Int64).alias("correlation"), pl.lit(None, pl.Int64).alias("graph_id"),
        pl.lit(None, pl.String).alias("launch_name"), pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"), pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"), "op_id", pl.col("name").alias("op_name"),
        pl.lit(OP_LINK_SELF).alias("op_link"),
    )


# --- links -------------------------------------------------------------------------------------


def launch_ops(lau: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """correlation → (op_id, op_name, op_link) for launches (columns correlation, launch_pid,
    launch_tid, launch_start_ns, _lext).

    The External id link is valid only for an op on the launch's thread that encloses the launch,
    i.e. the innermost enclosing op or one of its ancestors. So: find the innermost enclosing op
    by time; where its External id equals the launch's, the link is "external id"; where the
    launch's External id names an ancestor, that ancestor (a small hash join on the few
    remaining rows); otherwise (a broken or missing External id) the innermost op by time.
    """
    o = ops.select("op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id", "external_id")
    pts = lau.select("correlation", pl.col("launch_pid").alias("pid"), pl.col("launch_tid").alias("tid"),
                     pl.col("launch_start_ns").alias("t"), "_lext")
    inner = innermost_enclosing(pts, o, key="correlation", group=["pid", "tid"], id_col="op_id",
                                extra=["external_id"], carry=["pid", "tid", "t", "_lext"])
    same = pl.col("_lext").is_not_null() & (pl.col("external_id") == pl.col("_lext"))
    # Launch External ids that name an op other than the innermost: is it an enclosing ancestor?
    other = inner.filter(pl.col("_lext").is_not_null() & ~same.fill_null(False))
    anc = (
        other.select("correlation", "pid", "tid", "t", "_lext")
        .join(o.filter(pl.col("external_id").is_in(other["_lext"].implode())),
              left_on=["_lext", "pid", "tid"], right_on=["external_id", "pid", "tid"])
        .filter((pl.col("start_ns") <= pl.col("t")) & (pl.col("end_ns") >= pl.col("t")))
        .sort(["correlation", "depth"], descending=[False, True])
        .unique("correlation", keep="first")
        .select("correlation", pl.col("op_id").alias("_aid"))
    )
    out = inner.join(anc, on="correlation", how="left") if anc.height else inner.with_columns(pl.lit(None, pl.Int64).alias("_aid"))
    out = out.with_columns(pl.coalesce("_aid", "op_id").alias("op_id"))
    return out.select(
        "correlation", "op_id", _names_by_id(ops, out["op_id"]).alias("op_name"),
        pl.when(same.fill_null(False) | pl.col("_aid").is_not_null()).then(pl.lit(OP_LINK_EXTERNAL))
        .when(pl.col("op_id").is_not_null()).then(pl.lit(OP_LINK_TIME)).alias("op_link"),
    )


def _names_by_id(ops: pl.DataFrame, ids: pl.Series) -> pl.Series:
    """ops.name for each op id: a positional gather when op_id is the row index (as loaders
    write it), else a join."""
    n = ops.height
    if n == 0:
        return pl.Series("name", [None] * ids.len(), dtype=pl.String)
    if ops["op_id"].equals(pl.Series("op_id", range(n), dtype=ops["op_id"].dtype)):
        return ops["name"].gather(ids.cast(pl.Int64))
    if ops["op_id"].is_sorted():
        pos = ops["op_id"].search_sorted(ids.cast(pl.Int64).fill_null(-1)).clip(0, max(n - 1, 0))
        hit = ops["op_id"].gather(pos) == ids
        return pl.select(pl.when(hit).then(ops["name"].gather(pos))).to_series()
    m = pl.DataFrame({"op_id": ids.cast(pl.Int64)}).join(ops.select("op_id", "name"), on="op_id", how="left", maintain_order="left")
    return m["name"]


def innermost_enclosing(
    points: pl.DataFrame, intervals: pl.DataFrame, key: str, group: list[str], id_col: str,
    out: str | None = None, t: str = "t", extra: list[str] | None = None, carry: list[str] | None = None,
) -> pl.DataFrame:
    """For each point (``key``, ``group``…, ``t``): the innermost interval of its group whose
    [start_ns, end_ns] holds ``t`` → frame (key, ``out`` or id_col, *extra), null when none.

    An as-of join finds the latest-starting interval with start ≤ t (ties: the innermost, sorted
    last); if it ended before t, the answer is its nearest ancestor that still holds t, found by
    walking ``parent_id`` one nesting level per iteration (a loop over levels, not rows).
    ``extra`` columns of the interval and ``carry`` columns of the point come along.
    """
    out = out or id_col
    extra = extra or []
    carry = carry or []
    schema_out = {key: points.schema[key], **{c: points.schema[c] for c in carry}, out: pl.Int64(),
                  **{c: intervals.schema[c] for c in extra}}
    if points.height == 0:
        return pl.DataFrame(schema=schema_out)
    iv = intervals.select([*group, id_col, "start_ns", "end_ns", "parent_id", *extra]).drop_nulls([*group, "start_ns", "end_ns"])
    if iv.height == 0:
        return points.select(key, *carry).with_columns([pl.lit(None, d).alias(c) for c, d in schema_out.items() if c not in (key, *carry)])
    # The candidate carries its end, parent and extras, so most points resolve with no join.
    right = iv.sort(["start_ns", "end_ns"], descending=[False, True]).select(
        [*group, pl.col("start_ns").alias("_s"), pl.col(id_col).alias("_c"), pl.col("end_ns").alias("_e"),
         pl.col("parent_id").alias("_p"), *extra]
    )
    cur = (
        points.select(list(dict.fromkeys([key, *group, t, *carry]))).sort(t)
        .join_asof(right, left_on=t, right_on="_s", by=group, strategy="backward", check_sortedness=False)
        .select(list(dict.fromkeys([key, t, *carry])) + ["_c", "_e", "_p", *extra])
    )
    info = iv.select(pl.col(id_col).alias("_c"), pl.col("end_ns").alias("_e"), pl.col("parent_id").alias("_p"), *extra)
    done: list[pl.DataFrame] = []
    max_depth = intervals["depth"].max() if "depth" in intervals.columns else None
    levels = int(max_depth) + 2 if isinstance(max_depth, int) else iv.height + 1
    for _ in range(levels):
        ok = pl.col("_c").is_null() | (pl.col("_e") >= pl.col(t))
        done.append(cur.filter(ok).select(key, *carry, pl.col("_c").alias(out), *extra))
        nxt = cur.filter(~ok).select(list(dict.fromkeys([key, t, *carry])) + [pl.col("_p").alias("_c")])
        if nxt.height == 0:
            break
        # Few points walk up: look their parents up in the matching rows of ``info`` only.
        sub = info.filter(pl.col("_c").is_in(nxt["_c"].drop_nulls().implode()))
        cur = nxt.join(sub, on="_c", how="left")
    else:  # malformed nesting deeper than its own depth column: those points get no interval
        done.append(cur.filter(~ok).select(key, *carry).with_columns(
            [pl.lit(None, d).alias(c) for c, d in schema_out.items() if c not in (key, *carry)]))
    return pl.concat(done)


def forward_threads(ops: pl.DataFrame, regions: pl.DataFrame) -> pl.DataFrame:
    """Map each thread to its forward thread: (pid, tid) → fwd_tid, matches.

    Two ops on different threads of one process with the same autograd ``sequence_number`` are a
    forward op and its backward node; the thread whose op started first is the forward thread.
    A thread maps to the other thread where it is "second" most often, when that beats the
    reverse direction; only threads with CPU regions are targets, and a target never maps on
    (so chains and cycles cannot form).
    """
    out_schema = {"pid": pl.Int64(), "tid": pl.Int64(), "fwd_tid": pl.Int64(), "matches": pl.UInt32()}
    seq = (
        ops.filter(pl.col("sequence_number").is_not_null())
        .group_by("pid", "tid", "sequence_number")
        .agg(pl.col("start_ns").min())
    )
    if seq.height == 0 or regions.height == 0:
        return pl.DataFrame(schema=out_schema)
    pairs = seq.join(seq, on=["pid", "sequence_number"], suffix="_f").filter(
        (pl.col("tid") != pl.col("tid_f")) & (pl.col("start_ns_f") < pl.col("start_ns"))
    )
    counts = pairs.group_by("pid", "tid", "tid_f").agg(pl.len().alias("matches"))
    rev = counts.select("pid", pl.col("tid").alias("tid_f"), pl.col("tid_f").alias("tid"), pl.col("matches").alias("_rev"))
    counts = counts.join(rev, on=["pid", "tid", "tid_f"], how="left").filter(pl.col("matches") > pl.col("_rev").fill_null(0))
    targets = regions.select("pid", pl.col("tid").alias("tid_f")).unique()
    counts = counts.join(targets, on=["pid", "tid_f"], how="semi")
    best = counts.sort(["matches", "tid_f"], descending=[True, False]).unique(["pid", "tid"], keep="first")
    best = best.join(best.select("pid", pl.col("tid").alias("tid_f")), on=["pid", "tid_f"], how="anti")
    return best.select("pid", "tid", pl.col("tid_f").alias("fwd_tid"), "matches").cast(out_schema).sort("pid", "tid")  # type: ignore[arg-type]


def region_tree(regions: pl.DataFrame, thread_links: pl.DataFrame) -> pl.DataFrame:
    """CPU regions with their effective parent: the same-thread parent, or for a top-level region
    on a thread with a forward thread, the forward-thread region enclosing its start."""
    base = regions.select("region_id", "name", "pid", "tid", "start_ns", "end_ns", "parent_id").with_columns(
        pl.when(pl.col("parent_id").is_not_null()).then(pl.lit(VIA_THREAD)).otherwise(None).alias("via")
    )
    tops = base.filter(pl.col("parent_id").is_null()).join(thread_links.select("pid", "tid", "fwd_tid"), on=["pid", "tid"])
    if tops.height == 0:
        return base
    pts = tops.select("region_id", "pid", pl.col("fwd_tid").alias("tid"), pl.col("start_ns").alias("t"))
    found = innermost_enclosing(pts, regions, key="region_id", group=["pid", "tid"], id_col="region_id", out="_fp").drop_nulls()
    return base.join(found, on="region_id", how="left").with_columns(
        pl.coalesce("parent_id", "_fp").alias("parent_id"),
        pl.when(pl.col("_fp").is_not_null()).then(pl.lit(VIA_FORWARD)).otherwise(pl.col("via")).alias("via"),
    ).drop("_fp")


def _launch_regions(lau: pl.DataFrame, key: str, regions: pl.DataFrame, thread_links: pl.DataFrame) -> pl.DataFrame:
    """key → (region_id, region_name, region_via): the innermost region on the launch thread at
    the launch start; else, on a thread with a forward thread, the forward thread's region."""
    pts = lau.select(key, pl.col("launch_pid").alias("pid"), pl.col("launch_tid").alias("tid"),
                     pl.col("launch_start_ns").alias("t")).drop_nulls()
    own = innermost_enclosing(pts, regions, key=key, group=["pid", "tid"], id_col="region_id", extra=["name"], carry=["pid", "tid", "t"])
    found = own.filter(pl.col("region_id").is_not_null()).with_columns(pl.lit(VIA_THREAD).alias("region_via")).drop("pid", "tid", "t")
    miss = (
        own.filter(pl.col("region_id").is_null())
        .join(thread_links.select("pid", "tid", "fwd_tid"), on=["pid", "tid"])
        .select(key, "pid", pl.col("fwd_tid").alias("tid"), "t")
    )
    fwd = innermost_enclosing(miss, regions, key=key, group=["pid", "tid"], id_col="region_id", extra=["name"])
    fwd = fwd.filter(pl.col("region_id").is_not_null()).with_columns(pl.lit(VIA_FORWARD).alias("region_via"))
    return pl.concat([found, fwd]).select(key, "region_id", pl.col("name").alias("region_name"), "region_via").sort(key)


def _reason(acts: pl.DataFrame, regions: pl.DataFrame) -> pl.Expr:
    threads = regions.select("pid", "tid").unique()
    has_thread = pl.struct("launch_pid", "launch_tid").is_in(
        threads.select(pl.struct(pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"))).to_series().implode()
    )
    return (
        pl.when(pl.col("region_id").is_not_null()).then(None)
        .when(pl.col("launch_start_ns").is_null()).then(pl.lit(REASON_NO_LAUNCH))
        .when(pl.lit(regions.height == 0)).then(pl.lit(REASON_NO_REGIONS))
        .when(has_thread).then(pl.lit(REASON_OUTSIDE))
        .otherwise(pl.lit(REASON_OTHER_THREAD))
        .alias("unattributed_reason")
    )


def _region_links(acts: pl.DataFrame, tree: pl.DataFrame) -> pl.DataFrame:
    """(act_id, region_id, level) for every enclosing region, via the effective parents."""
    closure = ancestors(tree)
    att = acts.filter(pl.col("region_id").is_not_null()).select("act_id", pl.col("region_id").alias("_leaf"))
    return (
        att.join(closure, left_on="_leaf", right_on="region_id")
        .select("act_id", pl.col("ancestor_id").alias("region_id"), "level")
        .sort("act_id", "level")
    )


def ancestors(tree: pl.DataFrame) -> pl.DataFrame:
    """(region_id, ancestor_id, level): each region with itself (level 0) and every ancestor."""
    parent = tree.select("region_id", pl.col("parent_id").alias("_next")).drop_nulls()
    frontier = tree.select("region_id", pl.col("region_id").alias("ancestor_id"), pl.lit(0, pl.Int32).alias("level"))
    parts = [frontier]
    for _ in range(tree.height):
        frontier = frontier.join(parent, left_on="ancestor_id", right_on="region_id", suffix="_p").select(
            "region_id", pl.col("_next").alias("ancestor_id"), (pl.col("level") + 1).alias("level")
        )
        if frontier.height == 0:
            break
        parts.append(frontier)
    return pl.concat(parts)


# --- invariants --------------------------------------------------------------------------------


def check_conservation(attribution: Attribution, trace: Trace | None = None) -> None:
    """Raise :class:`AnalysisError` unless attributed + unattributed time == total time to the ns,
    every activity is either attributed or has a reason (never both, never neither), no activity
    appears twice, and (with ``trace``) the totals equal the source table's."""
    a = attribution.activities
    if a["act_id"].n_unique() != a.height:
        raise AnalysisError("an activity appears more than once in the attribution")
    if a.height != attribution.total_count:
        raise AnalysisError(f"{a.height} activities attributed, source has {attribution.total_count}")
    both = a.filter(pl.col("region_id").is_not_null() == pl.col("unattributed_reason").is_not_null()).height
    if both:
        raise AnalysisError(f"{both} activities have both (or neither of) a region and a reason")
    att = int(attribution.attributed["dur_ns"].sum() or 0)
    un = int(attribution.unattributed["dur_ns"].sum() or 0)
    if att + un != attribution.total_dur_ns:
        raise AnalysisError(f"attributed {att} ns + unattributed {un} ns != total {attribution.total_dur_ns} ns")
    if trace is not None:
        src = trace.kernels if not trace.is_cpu_only else _leaf_op_activities(trace.ops)
        src_dur = int((src["end_ns"] - src["start_ns"]).sum() or 0)
        if src.height != a.height or src_dur != att + un:
            raise AnalysisError(f"source has {src.height} activities / {src_dur} ns; attribution {a.height} / {att + un} ns")


def check_links(attribution: Attribution) -> None:
    """Raise :class:`AnalysisError` unless region_links holds, for each attributed activity,
    exactly one row per level (0 = its own region), no region twice, and nothing for
    unattributed activities."""
    links = attribution.region_links
    if links.select("act_id", "level").is_duplicated().any():
        raise AnalysisError("an activity is attributed twice at the same level")
    if links.select("act_id", "region_id").is_duplicated().any():
        raise AnalysisError("an activity links to the same region twice")
    lvl0 = links.filter(pl.col("level") == 0).select("act_id", pl.col("region_id").alias("_r"))
    att = attribution.attributed.select("act_id", "region_id").join(lvl0, on="act_id", how="full", coalesce=True)
    bad = att.filter(pl.col("region_id").is_null() | pl.col("_r").is_null() | (pl.col("region_id") != pl.col("_r"))).height
    if bad:
        raise AnalysisError(f"{bad} activities whose level-0 link differs from their region")
    gaps = links.group_by("act_id").agg((pl.col("level").max() + 1 == pl.len()).alias("ok")).filter(~pl.col("ok")).height
    if gaps:
        raise AnalysisError(f"{gaps} activities with a gap in their region levels")
