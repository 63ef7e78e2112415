"""Attribution: each device activity → its launch → the launching op → the innermost enclosing
CPU-side region (and, for totals, every enclosing region). docs/attribution.md says why each link:

1. activity → launch by ``correlation`` (a CUDA/HIP graph launch shares its correlation with every
   kernel of its replay, so they all land on the graph launch and its region);
2. launch → op: the innermost op on the launch's thread holding the launch start, or the
   enclosing ancestor its External id names;
3. launch → region: the innermost ``user_annotation``/``nvtx`` region on the launch's thread at the
   launch start (never the kernel's device time), else on the thread's *forward thread* (the one
   whose ops share its autograd sequence numbers and started them first).

CPU-only traces: the self-time stretches of CPU ops play the kernels' role. Vectorised polars on integer columns: as-of
joins on one sorted int64 key, per-launch answers gathered to activities by position (no hash join
at activity scale), names gathered once at the end; Python loops run over nesting levels only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from tracekit.tables import schema
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.intervals import self_time_segments
from tracekit.tables.trace import Trace

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

_I, _S = pl.Int64(), pl.String()
ACTIVITY_COLUMNS: Final[dict[str, pl.DataType]] = {
    "act_id": _I,
    "kind": _S,
    "name": _S,
    "device": _I,
    "stream": _I,
    "start_ns": _I,
    "end_ns": _I,
    "dur_ns": _I,
    "correlation": _I,
    "graph_id": _I,
    "launch_name": _S,
    "launch_pid": _I,
    "launch_tid": _I,
    "launch_start_ns": _I,
    "launch_end_ns": _I,
    "op_id": _I,
    "op_name": _S,
    "op_link": _S,
    "region_id": _I,
    "region_name": _S,
    "region_via": _S,
    "unattributed_reason": _S,
}


@dataclass(frozen=True)
class Attribution:
    """Result of :func:`attribute`.

    ``activities``: one row per device activity (``trace.kernels`` row; ``act_id`` = its row
    position) or, when ``cpu_only``, per self-time stretch of a CPU op (``op_id`` names it); columns
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
    """Attribute every device activity (or CPU-op self-time stretch in a CPU-only trace) of ``trace`` to the
    innermost CPU-side region that launched it. Pure; times in ns. See the module docstring."""
    cpu_only = trace.is_cpu_only
    regions = cpu_regions(trace.regions)
    thread_links = forward_threads(trace.ops, regions)
    tree = region_tree(regions, thread_links)
    if cpu_only:
        acts = cpu_op_activities(trace.ops)
        acts = acts if acts["act_id"].is_sorted() else acts.sort("act_id")
        reg = _launch_regions(
            acts.select(
                pl.col("launch_pid").alias("pid"),
                pl.col("launch_tid").alias("tid"),
                pl.col("launch_start_ns").alias("t"),
            ),
            regions,
            thread_links,
        )
        rrow, via, why = reg["_row"], reg["_via"], reg["_why"]
        link = pl.repeat(_code(OP_LINK_SELF), acts.height, dtype=pl.UInt8, eager=True)
    else:
        acts = _device_activities(trace.kernels)
        lau, pos = _launch_index(trace.launches, acts["correlation"])
        lops = launch_ops(lau, trace.ops)
        reg = _launch_regions(lau, regions, thread_links)
        # Per-launch answers → per activity, by position (a graph launch's kernels share one).
        lrow, orow, link = lau["_row"].gather(pos), lops["_row"].gather(pos), lops["_link"].gather(pos)
        rrow, via = reg["_row"].gather(pos), reg["_via"].gather(pos)
        why = pl.select(
            pl.when(pos.is_null()).then(pl.lit(_code(REASON_NO_LAUNCH), pl.UInt8)).otherwise(reg["_why"].gather(pos))
        ).to_series()
        launches, ops = trace.launches, trace.ops
        acts = acts.with_columns(
            launches["name"].gather(lrow).alias("launch_name"),
            launches["pid"].gather(lrow).alias("launch_pid"),
            launches["tid"].gather(lrow).alias("launch_tid"),
            launches["start_ns"].gather(lrow).alias("launch_start_ns"),
            launches["end_ns"].gather(lrow).alias("launch_end_ns"),
            ops["op_id"].gather(orow).alias("op_id"),
            ops["name"].gather(orow).alias("op_name"),
        )
    total_count = acts.height
    total_dur = int(acts["dur_ns"].sum() or 0)
    acts = acts.with_columns(
        _text(link).alias("op_link"),
        regions["region_id"].gather(rrow).alias("region_id"),
        regions["name"].gather(rrow).alias("region_name"),
        _text(via).alias("region_via"),
        _text(why).alias("unattributed_reason"),
    ).select([pl.col(c).cast(t) for c, t in ACTIVITY_COLUMNS.items()])
    links = _region_links(acts, tree)
    stats = {
        "activities": acts.height,
        "attributed": int(rrow.is_not_null().sum()),
        "op_link": _counts(link),
        "region_via": _counts(via),
    }
    return Attribution(acts, links, cpu_only, total_count, total_dur, tree, thread_links, stats)


# Small-integer codes for the text columns: computed on UInt8, turned into text once at the end.
_LABELS: Final = (OP_LINK_EXTERNAL, OP_LINK_TIME, OP_LINK_SELF, VIA_THREAD, VIA_FORWARD, *REASONS)


def _code(label: str) -> int:
    return _LABELS.index(label)


def _text(codes: pl.Series) -> pl.Series:
    return pl.Series(_LABELS, dtype=pl.String).gather(codes)


def _counts(codes: pl.Series) -> dict[str | None, int]:
    vc = codes.value_counts()
    return {(_LABELS[c] if c is not None else None): int(n) for c, n in vc.iter_rows()}


# --- sources -----------------------------------------------------------------------------------


def cpu_regions(regions: pl.DataFrame) -> pl.DataFrame:
    """The CPU-side regions used for attribution (``user_annotation`` and ``nvtx``); the device
    projections (``gpu_user_annotation``) are left out."""
    return regions.filter(pl.col("kind").is_in(list(CPU_REGION_KINDS))).select(
        "region_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"
    )


def _device_activities(kernels: pl.DataFrame) -> pl.DataFrame:
    return kernels.with_row_index("act_id").select(
        pl.col("act_id").cast(pl.Int64),
        "kind",
        "name",
        "device",
        "stream",
        "start_ns",
        "end_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        "correlation",
        "graph_id",
    )


def _launch_index(launches: pl.DataFrame, corr: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """The launches some activity uses, one per correlation (a repeated correlation would count
    its kernels twice: the earliest call is kept), sorted by correlation, as (_row = row in
    ``launches``, pid, tid, t, _lext); and for each activity its row in that frame (null: no launch
    has its correlation). Sorts and binary searches on the integer correlation only."""
    lau = launches.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"), "correlation", "start_ns")
    lau = lau.filter(pl.col("correlation").is_not_null())
    lau = lau if lau["correlation"].is_sorted() else lau.sort("correlation")
    c = lau["correlation"]
    dup = ((c == c.shift(1)) | (c == c.shift(-1))).fill_null(False)
    if dup.any():  # rare: keep the earliest call of each repeated correlation
        first = (
            lau.filter(dup).sort(["correlation", "start_ns"], maintain_order=True).unique("correlation", keep="first")
        )
        lau = pl.concat([lau.filter(~dup), first]).sort("correlation")
        c = lau["correlation"]
    m, n = lau.height, len(corr)
    at = c.search_sorted(corr.fill_null(0)).cast(pl.Int64).clip(0, max(m - 1, 0))
    hit = (c.gather(at) == corr).fill_null(False) if m else pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    used = pl.repeat(False, m, dtype=pl.Boolean, eager=True).scatter(at.filter(hit), True)
    dense = used.cast(pl.Int64).cum_sum() - 1  # row in the used-only frame
    pos = (
        pl.select(pl.when(hit).then(dense.gather(at))).to_series()
        if m
        else pl.repeat(None, n, dtype=pl.Int64, eager=True)
    )
    rows = lau.filter(used)["_row"]
    lau = pl.DataFrame(
        {
            "_row": rows,
            "pid": launches["pid"].gather(rows),
            "tid": launches["tid"].gather(rows),
            "t": launches["start_ns"].gather(rows),
            "_lext": launches["external_id"].gather(rows),
        }
    )
    return lau, pos


def cpu_op_activities(ops: pl.DataFrame) -> pl.DataFrame:
    """CPU-only traces: each op's self-time stretches (:func:`self_time_segments`) are the
    activities; the "launch" is the op itself, at the stretch's start. act_id = row number."""
    segs = self_time_segments(ops).with_row_index("act_id").with_columns(pl.col("act_id").cast(pl.Int64))
    info = ops.select("op_id", "name", "pid", "tid")
    acts = segs.join(info, on="op_id", how="left").sort("act_id")
    return acts.select(
        "act_id",
        pl.lit(schema.KIND_CPU_OP).alias("kind"),
        "name",
        pl.lit(None, pl.Int64).alias("device"),
        pl.lit(None, pl.Int64).alias("stream"),
        "start_ns",
        "end_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        pl.lit(None, pl.Int64).alias("correlation"),
        pl.lit(None, pl.Int64).alias("graph_id"),
        pl.lit(None, pl.String).alias("launch_name"),
        pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"),
        pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"),
        "op_id",
        pl.col("name").alias("op_name"),
    )


# --- links -------------------------------------------------------------------------------------


def launch_ops(lau: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """For launches (pid, tid, t, _lext; one per row): the launching op's row in ``ops`` (_row) and
    how it was found (_link code), one row per launch in launch order.

    The External id link is valid only for an op on the launch's thread that encloses the launch,
    i.e. the innermost enclosing op or one of its ancestors. So: find the innermost enclosing op
    by time; where its External id equals the launch's, the link is "external id"; where the
    launch's External id names an ancestor, that ancestor (a small hash join on the few
    remaining rows); otherwise (a broken or missing External id) the innermost op by time.
    """
    row = innermost_rows(lau, ops, group=["pid", "tid"], id_col="op_id")
    inner = lau.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_k"), "pid", "tid", "t", "_lext").with_columns(
        row.alias("_row"), ops["external_id"].gather(row).alias("_ext")
    )
    same = (pl.col("_lext").is_not_null() & (pl.col("_ext") == pl.col("_lext"))).fill_null(False)
    # Launch External ids that name an op other than the innermost: is it an enclosing ancestor?
    other = inner.filter(pl.col("_lext").is_not_null() & ~same)
    o = ops.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_arow"),
        "pid",
        "tid",
        "start_ns",
        "end_ns",
        "depth",
        "external_id",
    )
    anc = (
        other.select("_k", "pid", "tid", "t", "_lext")
        .join(
            o.filter(pl.col("external_id").is_in(other["_lext"].implode())),
            left_on=["_lext", "pid", "tid"],
            right_on=["external_id", "pid", "tid"],
        )
        .filter((pl.col("start_ns") <= pl.col("t")) & (pl.col("end_ns") >= pl.col("t")))
        .sort(["_k", "depth"], descending=[False, True])
        .unique("_k", keep="first")
        .select("_k", "_arow")
    )
    arow = pl.repeat(None, inner.height, dtype=pl.Int64, eager=True)
    inner = inner.with_columns((arow.scatter(anc["_k"], anc["_arow"]) if anc.height else arow).alias("_arow"))
    return inner.select(
        pl.coalesce("_arow", "_row").alias("_row"),
        pl.when(same | pl.col("_arow").is_not_null())
        .then(pl.lit(_code(OP_LINK_EXTERNAL), pl.UInt8))
        .when(pl.col("_row").is_not_null())
        .then(pl.lit(_code(OP_LINK_TIME), pl.UInt8))
        .alias("_link"),
    )


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
    rev = counts.select(
        "pid", pl.col("tid").alias("tid_f"), pl.col("tid_f").alias("tid"), pl.col("matches").alias("_rev")
    )
    counts = counts.join(rev, on=["pid", "tid", "tid_f"], how="left").filter(
        pl.col("matches") > pl.col("_rev").fill_null(0)
    )
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
    tops = base.filter(pl.col("parent_id").is_null()).join(
        thread_links.select("pid", "tid", "fwd_tid"), on=["pid", "tid"]
    )
    if tops.height == 0:
        return base
    pts = tops.select("region_id", "pid", pl.col("fwd_tid").alias("tid"), pl.col("start_ns").alias("t"))
    row = innermost_rows(pts, regions, group=["pid", "tid"], id_col="region_id")
    found = pts.select("region_id", regions["region_id"].gather(row).alias("_fp")).drop_nulls()
    return (
        base.join(found, on="region_id", how="left")
        .with_columns(
            pl.coalesce("parent_id", "_fp").alias("parent_id"),
            pl.when(pl.col("_fp").is_not_null()).then(pl.lit(VIA_FORWARD)).otherwise(pl.col("via")).alias("via"),
        )
        .drop("_fp")
    )


def _launch_regions(pts: pl.DataFrame, regions: pl.DataFrame, thread_links: pl.DataFrame) -> pl.DataFrame:
    """For launches (pid, tid, t; one per row), in launch order: the innermost region on the launch
    thread at the launch start, else, on a thread with a forward thread, the forward thread's
    region (_row = its row in ``regions``, _via code); else the reason code (_why)."""
    row = innermost_rows(pts, regions, group=["pid", "tid"], id_col="region_id")
    via = pl.select(pl.when(row.is_not_null()).then(pl.lit(_code(VIA_THREAD), pl.UInt8))).to_series()
    miss = pts.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_k"), "pid", "tid", "t").filter(row.is_null())
    links = miss.join(thread_links.select("pid", "tid", "fwd_tid"), on=["pid", "tid"]).select(
        "_k", "pid", pl.col("fwd_tid").alias("tid"), "t"
    )
    if links.height:
        frow = innermost_rows(links, regions, group=["pid", "tid"], id_col="region_id")
        fwd = links.select("_k", frow.alias("_row")).drop_nulls("_row")
        row = row.scatter(fwd["_k"], fwd["_row"])
        via = via.scatter(fwd["_k"], pl.repeat(_code(VIA_FORWARD), fwd.height, dtype=pl.UInt8, eager=True))
    # Unattributed launches: does their thread have regions at all?
    threads = regions.select("pid", "tid").unique()
    inside = miss.join(threads, on=["pid", "tid"], how="semi")["_k"]
    why = pl.repeat(
        _code(REASON_NO_REGIONS if regions.height == 0 else REASON_OTHER_THREAD), len(row), dtype=pl.UInt8, eager=True
    )
    if inside.len():
        why = why.scatter(inside, pl.repeat(_code(REASON_OUTSIDE), inside.len(), dtype=pl.UInt8, eager=True))
    why = pl.select(pl.when(row.is_null()).then(why)).to_series()
    return pl.DataFrame({"_row": row, "_via": via, "_why": why})


def _region_links(acts: pl.DataFrame, tree: pl.DataFrame) -> pl.DataFrame:
    """(act_id, region_id, level) for every enclosing region, via the effective parents, sorted by
    (act_id, level): each activity's region's ancestor list is cut out of the flat closure table
    (sorted by region, level) by offset and length, so nothing at activity scale is joined or sorted."""
    closure = ancestors(tree).sort("region_id", "level")
    per = (
        closure.group_by("region_id", maintain_order=True)
        .len()
        .with_columns((pl.col("len").cum_sum() - pl.col("len")).alias("_off"))
    )
    att = acts.filter(pl.col("region_id").is_not_null()).select("act_id", "region_id")
    if att.height == 0 or per.height == 0:
        return pl.DataFrame(schema={"act_id": pl.Int64(), "region_id": pl.Int64(), "level": pl.Int32()})
    at = per["region_id"].search_sorted(att["region_id"]).cast(pl.Int64).clip(0, per.height - 1)
    n = per["len"].cast(pl.Int64).gather(at)
    i = pl.int_range(att.height, dtype=pl.Int64, eager=True).repeat_by(n).explode()  # activity of each link
    level = pl.int_range(i.len(), dtype=pl.Int64, eager=True) - (n.cum_sum() - n).gather(i)
    return pl.DataFrame(
        {
            "act_id": att["act_id"].gather(i),
            "region_id": closure["ancestor_id"].gather(per["_off"].cast(pl.Int64).gather(at).gather(i) + level),
            "level": level.cast(pl.Int32),
        }
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
