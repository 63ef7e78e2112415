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

The steps live in ``activities.py`` (what is attributed, and its launches), ``links.py`` (the
links and the region tree) and ``codes.py`` (the words of ``op_link``, ``region_via`` and
``unattributed_reason``); this module runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from tracekit.attribution.activities import cpu_op_activities, cpu_regions, device_activities, launch_index
from tracekit.attribution.codes import OP_LINK_SELF, REASON_NO_LAUNCH, code, counts, text
from tracekit.attribution.links import forward_threads, launch_ops, launch_regions, region_links, region_tree
from tracekit.tables.trace import Trace
from tracekit.tables.gather import take

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


def attribute(trace: Trace, release: bool = False) -> Attribution:
    """Attribute every device activity (or CPU-op self-time stretch in a CPU-only trace) of ``trace`` to the
    innermost CPU-side region that launched it. Pure; times in ns. See the module docstring.
    ``release``: for a caller that reads the trace's kernels, launches and ops no more (the
    derived tables' store, tracekit/analysis/store/compute.py): they are emptied in ``trace`` once
    the activities have taken what they need of them, before the activity columns and the region
    links are made, so a big trace holds less memory at that step."""
    cpu_only = trace.is_cpu_only
    regions = cpu_regions(trace.regions)
    thread_links = forward_threads(trace.ops, regions)
    tree = region_tree(regions, thread_links)
    launch_cols: list[pl.Series] = []  # the launch and op of each activity (not in a CPU-only trace)
    if cpu_only:
        acts = cpu_op_activities(trace.ops)  # in act_id order
        link, rrow, via, why = _cpu_links(acts, regions, thread_links)
    else:
        acts = device_activities(trace.kernels)
        launch_cols, (link, rrow, via, why) = _device_links(trace, acts, regions, thread_links, release)
    if release:
        trace.kernels, trace.launches, trace.ops = trace.kernels.clear(), trace.launches.clear(), trace.ops.clear()
    total_count = acts.height
    total_dur = int(acts["dur_ns"].sum() or 0)
    acts = (
        acts.lazy()
        .with_columns(*launch_cols)
        .with_columns(
            text(link).alias("op_link"),
            take(regions["region_id"], rrow).alias("region_id"),
            take(regions["name"], rrow).alias("region_name"),
            text(via).alias("region_via"),
            text(why).alias("unattributed_reason"),
        )
        .select([pl.col(c).cast(t) for c, t in ACTIVITY_COLUMNS.items()])
        .collect(engine="in-memory")
    )
    links = region_links(acts, tree)
    stats = {
        "activities": acts.height,
        "attributed": int(rrow.is_not_null().sum()),
        "op_link": counts(link),
        "region_via": counts(via),
    }
    return Attribution(acts, links, cpu_only, total_count, total_dur, tree, thread_links, stats)


_Links = tuple[pl.Series, pl.Series, pl.Series, pl.Series]  # op link, region row, region via, reason codes


def _cpu_links(acts: pl.DataFrame, regions: pl.DataFrame, thread_links: pl.DataFrame) -> _Links:
    """A CPU-only trace: each op stretch is its own launch, in the region around its start."""
    reg = launch_regions(
        acts.select(
            pl.col("launch_pid").alias("pid"),
            pl.col("launch_tid").alias("tid"),
            pl.col("launch_start_ns").alias("t"),
        ),
        regions,
        thread_links,
    )
    link = pl.repeat(code(OP_LINK_SELF), acts.height, dtype=pl.UInt8, eager=True)
    return link, reg["_row"], reg["_via"], reg["_why"]


def _device_links(
    trace: Trace, acts: pl.DataFrame, regions: pl.DataFrame, thread_links: pl.DataFrame, release: bool
) -> tuple[list[pl.Series], _Links]:
    """Each device activity's launch and op columns, and its links: per-launch answers → per
    activity, by position (a graph launch's kernels share one); each table's columns taken as soon
    as its rows are known (``release``: then let go)."""
    lau, pos = launch_index(trace.launches, acts["correlation"])
    lrow = take(lau["_row"], pos)
    launches = trace.launches
    launch_cols = [
        take(launches["name"], lrow).alias("launch_name"),
        take(launches["pid"], lrow).alias("launch_pid"),
        take(launches["tid"], lrow).alias("launch_tid"),
        take(launches["start_ns"], lrow).alias("launch_start_ns"),
        take(launches["end_ns"], lrow).alias("launch_end_ns"),
    ]
    del launches, lrow
    if release:
        trace.launches = trace.launches.clear()
    lops = launch_ops(lau, trace.ops)
    orow, link = take(lops["_row"], pos), take(lops["_link"], pos)
    ops = trace.ops
    launch_cols += [take(ops["op_id"], orow).alias("op_id"), take(ops["name"], orow).alias("op_name")]
    del ops, lops, orow
    if release:
        trace.ops = trace.ops.clear()
    reg = launch_regions(lau, regions, thread_links)
    rrow, via = take(reg["_row"], pos), take(reg["_via"], pos)
    why = pl.select(
        pl.when(pos.is_null()).then(pl.lit(code(REASON_NO_LAUNCH), pl.UInt8)).otherwise(take(reg["_why"], pos))
    ).to_series()
    return launch_cols, (link, rrow, via, why)
