"""Derived tables stored beside a trace in an ingested dataset, so re-analysis skips recomputing them.

At ingest (:func:`write_with_derived`; ``compute.store_derived`` for a trace already committed) the
dataset also receives, in the same hive layout and the
same atomic commit (written before ``meta``)::

    DIR/attribution_activities/trace_id=<id>/data.parquet   # attribute(trace).activities
    DIR/attribution_links/trace_id=<id>/data.parquet        # attribute(trace).region_links
    DIR/region_labels/trace_id=<id>/data.parquet            # label_regions(trace) (no --phase-map)
    DIR/op_costs/trace_id=<id>/data.parquet                 # op_id + the cost columns of op_costs
    DIR/derived_key/trace_id=<id>/data.parquet              # one row: key, cpu_only, row counts

The key names the code that computed them: tracekit version, schema version, this module's
format number and a hash of the source of the modules that compute them (attribution, regions,
phases, cost model, ...). :func:`read_derived` returns None — and the analysis recomputes — when
the key or the canonical tables' row counts differ, or a table is missing: stale derived tables
are never trusted. See docs/analysis.md ("Re-analysis from a dataset").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.analysis.store.key import (  # noqa: F401 - re-exported: the store's names
    ACTIVITIES,
    CANONICAL,
    COST_COLUMNS,
    COSTS,
    DERIVED_TABLES,
    KEY,
    LABELS,
    LINKS,
    NOT_NULL,
    STORED,
    derived_key,
    key_frame,
)
from tracekit.conventions import GRAPH_LAUNCH_RE
from tracekit.analysis.idle.causes import BLOCKING, EVENT_WAIT
from tracekit.analysis.idle.causes import cold_launch
from tracekit.analysis.regions.cold import CAPTURE_CALL
from tracekit.attribution.core import ACTIVITY_COLUMNS, attribute
from tracekit.costmodel.ops import trace_costs
from tracekit.labels.regions import label_regions
from tracekit.tables.trace import write_dataset
from tracekit.analysis.store.compute import store_derived
from tracekit.errors import DatasetError
from tracekit.tables.locks import trace_lock
from tracekit.analysis.store.compute import put
from tracekit.tables.trace import remove_partition
import json
from tracekit.tables.layout import DATA_FILE
import tracekit
from tracekit.tables.layout import choose_trace
from tracekit.tables.layout import dataset_trace_ids
from tracekit.tables.layout import is_dataset

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace

# What the analysis reads of a dataset trace whose derived tables are current (and no --phase-map):
# attribution, costs and labels come stored, so the canonical tables serve only the copy bytes,
# communication and its message sizes (kernels), blocking calls (launches), host op stretches, shapes and the KV-cache
# estimate (ops). Other columns stay null constants (no memory per row); regions are read whole.
ANALYSIS_COLUMNS: dict[str, tuple[str, ...]] = {
    "kernels": ("kind", "name", "device", "stream", "start_ns", "end_ns", "bytes", "comm_bytes"),
    "launches": ("name", "pid", "tid", "start_ns", "end_ns"),
    "ops": ("op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id", "input_dims", "input_types"),
}

# Of those, the columns that a trace without recorded shapes holds all null (e.g. Kineto without
# record_shapes): made null constants without being decoded, so they hold no memory per row.
ANALYSIS_SPARSE: dict[str, tuple[str, ...]] = {"ops": ("input_dims", "input_types")}


def analysis_rows() -> dict[str, pl.Expr]:
    """The rows the analysis reads of a dataset trace with current derived tables: of the launches,
    only the blocking calls, the cold-start launch calls (the only use of the launches then: the
    idle causes' ``blocking_calls``, tracekit/analysis/idle/causes.py; ``cold_launch`` gives the
    same rows again on what it kept), the graph launches (the features' CUDA/HIP graphs,
    tracekit/analysis/features.py) and the graph-capture calls (cold-start windows,
    tracekit/analysis/regions/cold.py; no launch call, so no change to the launch medians) and the
    event waits (``cudaStreamWaitEvent``: launch dependencies, tracekit/analysis/idle/causes.py)."""

    name = pl.col("name")
    return {
        "launches": name.str.contains(BLOCKING)
        | cold_launch()
        | name.str.contains(GRAPH_LAUNCH_RE)
        | name.str.contains(CAPTURE_CALL)
        | name.str.contains(EVENT_WAIT)
    }


# The stored activities' columns the analysis uses (tracekit/analysis/pipeline.py and below): all
# but the graph id and the words of the links.
_UNREAD = ("graph_id", "op_link", "region_name", "region_via")
ANALYSIS_ACTIVITY_COLUMNS = tuple(c for c in ACTIVITY_COLUMNS if c not in _UNREAD)


@dataclass(frozen=True)
class Derived:
    """The frames the analysis needs besides the trace (``costs`` is ``op_costs(trace.ops)``)."""

    activities: pl.DataFrame
    region_links: pl.DataFrame
    labels: pl.DataFrame
    costs: pl.DataFrame
    cpu_only: bool


def compute_derived(trace: Trace) -> dict[str, pl.DataFrame]:
    """Attribution (activities, links), region labels and op costs of ``trace``, as dataset tables
    (of a trace already in a dataset, :func:`tracekit.analysis.store.compute.store_derived` makes the same tables
    reading only what they need)."""

    att = attribute(trace)
    costs = trace_costs(trace, att.activities)
    tables = {
        ACTIVITIES: att.activities,
        LINKS: att.region_links,
        LABELS: label_regions(trace, tree=att.region_tree).drop("trace_id", strict=False),
        COSTS: costs.select("op_id", *[c for c in COST_COLUMNS if c in costs.columns]),
    }
    columns = {n: [c for c in f.columns if c != "trace_id"] for n, f in tables.items()}  # as written
    tables[KEY] = key_frame(bool(att.cpu_only), {n: trace.table(n).height for n in CANONICAL}, columns)
    return tables


def write_with_derived(trace: Trace, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``trace`` and its derived tables into the dataset at ``out_dir`` in one atomic commit
    (what ``tracekit ingest`` calls)."""

    return write_dataset(trace, out_dir, extra=lambda: compute_derived(trace))


def ensure_derived(trace: Trace) -> bool:
    """For a trace read from a dataset that holds no current derived tables (a streamed Kineto or
    a chunked Nsight ingest writes none; a code change makes them stale): compute and store them,
    so later analyses of it skip attribution, costs and labels (:func:`read_derived`). True when
    stored; False when not needed or not possible (not from a dataset, read-only). Best effort:
    never raises for I/O. (``tracekit analyze`` without ``--phase-map`` stores them before reading
    the trace instead: :func:`load_for_analysis`.)"""
    root = trace.meta.get("dataset_path")
    # a trace read in part is never a source of tables; current ones: nothing to do
    if trace.read_in_part or not root or not trace.trace_id or _current_key(trace) is not None:
        return False
    try:
        with trace_lock(Path(root), trace.trace_id, wait_s=0):  # another writer at work: not stored
            remove_partition(Path(root), KEY, trace.trace_id)
            tables = compute_derived(trace)
            for name in (ACTIVITIES, LINKS, LABELS, COSTS, KEY):
                put(Path(root), name, trace.trace_id, tables[name])
    except (OSError, pl.exceptions.PolarsError, DatasetError):
        return False
    return True


def _current_key(trace: Trace) -> tuple[dict[str, Path], dict[str, Any]] | None:
    """The derived tables' files and key row of a trace read from a dataset, when every table is
    there and the key and row counts say they are current; None otherwise (the only reads: the
    one-row ``derived_key`` file)."""
    root = trace.meta.get("dataset_path")
    tid = trace.trace_id
    if not root or not tid:
        return None
    full = trace.meta.get("dataset_rows") or {}  # tables read in part: their rows in the dataset
    return _key_files(Path(root), tid, {n: int(full.get(n, trace.table(n).height)) for n in CANONICAL})


def _key_files(root: Path, tid: str, rows: dict[str, int]) -> tuple[dict[str, Path], dict[str, Any]] | None:
    """:func:`_current_key` for the trace ``tid`` of the dataset ``root`` whose canonical tables
    have ``rows`` rows."""
    files = {n: root / n / f"trace_id={tid}" / "data.parquet" for n in DERIVED_TABLES}
    if not all(f.is_file() for f in files.values()):
        return None
    try:
        key = pl.read_parquet(files[KEY]).row(0, named=True)
    except (OSError, pl.exceptions.PolarsError):
        return None
    if key.get("key") != derived_key() or any(key.get(f"{n}_rows") != rows[n] for n in CANONICAL):
        return None
    if not _columns_as_written(files, key.get("columns")):
        return None
    return files, key


def _columns_as_written(files: dict[str, Path], recorded: Any) -> bool:
    """Whether each stored derived table holds the columns the key recorded when it was written
    (a file renamed, swapped or rewritten since is not read: the analysis recomputes it)."""

    try:
        want = json.loads(recorded) if isinstance(recorded, str) else None
        return isinstance(want, dict) and all(list(pl.read_parquet_schema(files[n])) == want.get(n) for n in STORED)
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return False


def stored_current(dataset: str | os.PathLike[str], trace_id: str) -> bool:
    """True when the trace ``trace_id`` of ``dataset`` has current derived tables, judged without
    reading its tables (row counts from the Parquet footers)."""

    root = Path(dataset)
    try:
        counts = pl.collect_all(
            [pl.scan_parquet(root / n / f"trace_id={trace_id}" / DATA_FILE).select(pl.len()) for n in CANONICAL]
        )
    except (OSError, pl.exceptions.PolarsError):
        return False
    return _key_files(root, trace_id, {n: int(c.item()) for n, c in zip(CANONICAL, counts)}) is not None


def load_for_analysis(
    source: str | os.PathLike[str],
    trace_id: str | None = None,
    captures: list[str] | None = None,
    lean: bool = True,
    ensure: bool = False,
    model: str | None = None,
    parallel: str | None = None,
) -> Trace:
    """The trace at ``source`` as the analysis needs it. A dataset trace whose derived tables are
    current is read with only :data:`ANALYSIS_COLUMNS` when ``lean`` (no ``--phase-map``: the
    labels come stored); otherwise the whole trace (``tracekit.load``). With ``ensure`` its missing
    or stale derived tables are computed and stored (best effort): with ``lean`` first, from only
    the columns they need (:func:`tracekit.analysis.store.compute.store_derived`), and the trace then read with only
    the analysis's columns; without, from the whole trace (:func:`ensure_derived`). ``model``: a
    model config (--model): the whole trace is read with it and its costs are computed again."""

    if captures or model or not is_dataset(source):
        return tracekit.load(str(source), trace_id=trace_id, captures=captures, model=model, parallel=parallel)
    root = Path(source)
    tid = choose_trace(root, dataset_trace_ids(root), trace_id)
    if lean and stored_current(root, tid):
        from tracekit.sources.guard import reading
        from tracekit.tables.trace import read_dataset

        with reading(root):
            return read_dataset(root, tid, columns=ANALYSIS_COLUMNS, rows=analysis_rows(), sparse=ANALYSIS_SPARSE)
    if ensure and lean:
        # computed and stored reading only what they need, before the trace is read (the whole
        # trace held with them raised a big trace's peak); then the analysis reads
        # only what it needs too. Best effort: a dataset that cannot be read or written (e.g.
        # read-only) is read whole below.
        try:
            store_derived(root, tid)
        except (OSError, pl.exceptions.PolarsError, DatasetError):
            pass
        else:
            return load_for_analysis(root, tid)
    trace = tracekit.load(str(root), trace_id=tid)
    if ensure and not lean:  # (--phase-map) the whole trace is read anyway: they are computed from it
        ensure_derived(trace)
    return trace


def read_derived(trace: Trace, activity_columns: tuple[str, ...] | None = None) -> Derived | None:
    """The stored derived tables of a trace read from a dataset, or None when the trace did not
    come from a dataset, a table is missing, or the key / row counts say they are stale.
    ``activity_columns``: only these columns of the activities (e.g. :data:`ANALYSIS_ACTIVITY_COLUMNS`)."""
    found = _current_key(trace)
    if found is None:
        return None
    files, key = found
    tid = trace.trace_id
    names = (ACTIVITIES, LINKS, LABELS, COSTS)
    # A device activity's name is its kernel's (attribution/activities.py: act_id = the kernels
    # row). Read without it and gathered from trace.kernels, the names share that table's string
    # buffers instead of being a second copy (less memory held on a big trace).
    kernel_names = (
        not key.get("cpu_only")
        and trace.kernels.height > 0
        and (activity_columns is None or "name" in activity_columns)
    )
    scans = [pl.scan_parquet(files[n]) for n in names]
    try:
        if activity_columns is not None:
            have = scans[0].collect_schema().names()
            scans[0] = scans[0].select([c for c in have if c in activity_columns])
        if kernel_names:
            scans[0] = scans[0].select(pl.exclude("name"))
        # one file at a time, each settled (one chunk per column, a column at a time: columns
        # added later do not copy the frame) before the next is read (tables/trace.py settled)
        from tracekit.tables.trace import null_columns, settled

        frames = {}
        for n, scan in zip(names, scans):
            sch = scan.collect_schema()
            # a trace whose ops have no cost model stores all-null cost columns: made null
            # constants without being decoded: they hold no memory per row
            nulls = null_columns(files[n], [c for c in COST_COLUMNS if c in sch]) if n == COSTS else set()
            if nulls:
                scan = scan.select(pl.lit(None, dtype=t).alias(c) if c in nulls else pl.col(c) for c, t in sch.items())
            frames[n] = settled(scan.collect(), [c for c in sch if c not in nulls], constants=True)
    except (OSError, pl.exceptions.PolarsError):
        return None
    if any(frames[n][c].null_count() for n, cols in NOT_NULL.items() for c in cols if c in frames[n].columns):
        return None  # ids nulled since written: recompute
    if kernel_names:
        acts = frames[ACTIVITIES]
        if acts.height and int(acts["act_id"].max()) >= trace.kernels.height:  # type: ignore[arg-type]
            return None  # not this trace's activities after all: recompute
        cols = acts.columns
        at = cols.index("kind") + 1 if "kind" in cols else 1
        frames[ACTIVITIES] = acts.insert_column(at, trace.kernels["name"].gather(acts["act_id"]).alias("name"))
    stored = frames[COSTS]
    ops = trace.ops
    if stored["op_id"].equals(ops["op_id"]):
        costs = ops.hstack(stored.drop("op_id").get_columns())
    else:
        costs = ops.join(stored, on="op_id", how="left")
    labels = frames[LABELS].with_columns(pl.lit(tid).alias("trace_id")).select("trace_id", pl.exclude("trace_id"))
    return Derived(frames[ACTIVITIES], frames[LINKS], labels, costs, bool(key.get("cpu_only")))
