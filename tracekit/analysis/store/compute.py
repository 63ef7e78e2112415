"""Computing and storing the derived tables of a trace already committed in a dataset, reading only
what they need (tracekit/analysis/store/derived.py: ``load_for_analysis(ensure=True)``).

The columns of the canonical tables that attribution, op costs and region labels read are
:data:`ATTRIBUTION_COLUMNS` and :data:`COSTS_COLUMNS` (regions whole); the others are null constants
that hold no memory per row. The kernels' names are not read for the attribution: an activity's name
is its kernel's (``act_id`` = the kernels row), so the stored activities take the kernels' ``name``
column from their file when they are written, after the launches and kernels are let go. Each table
is written as soon as it is made and released before the next: the links and activities, then the
costs (the kernels each op launched are read back from the stored activities, and only for a trace
with a MoE op), the labels, and ``derived_key`` last. The tables are those
:func:`derived.compute_derived` makes of the whole trace (tests/test_derived_store.py). With the
whole trace loaded for them, the first ``tracekit analyze DS --format json`` of a big dataset
(streamed ingest, no derived tables) peaked much higher; docs/analysis.md and BENCHMARKS.md give the
figures with this reader.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import polars as pl

from tracekit.analysis.store import key as d
from tracekit.tables import schema
from tracekit.tables.locks import trace_lock
from tracekit.attribution.core import attribute
from tracekit.costmodel.ops import trace_costs
from tracekit.labels.regions import label_regions
from tracekit.tables.layout import DATA_FILE
from tracekit.tables.gather import take
from tracekit.tables.trace import read_dataset
from tracekit.tables.trace import remove_partition
from tracekit.tables.trace import write_part

# What attribute() reads of the canonical tables (tracekit/attribution). The kernels' ``name`` is
# not among them: see the module docstring.
ATTRIBUTION_COLUMNS: dict[str, tuple[str, ...]] = {
    "kernels": ("kind", "device", "stream", "start_ns", "end_ns", "correlation", "graph_id"),
    "launches": ("name", "pid", "tid", "start_ns", "end_ns", "correlation", "external_id"),
    "ops": (
        *("op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"),
        *("external_id", "sequence_number"),
    ),
    "regions": ("region_id", "name", "kind", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"),
}
# What trace_costs() reads of the ops (tracekit/costmodel: the op tree, the names and arguments,
# the threads and start times for the enclosing step annotations); with the whole regions table,
# which label_regions() reads too (given the attribution's region tree: no ops).
COSTS_COLUMNS: dict[str, tuple[str, ...]] = {
    "ops": ("op_id", "name", "pid", "tid", "start_ns", "parent_id", "input_dims", "input_types", "concrete_inputs"),
    "regions": tuple(c for c in schema.REGIONS if c != "trace_id"),
}
# The columns a trace often holds all null (no CUDA graphs, no recorded shapes): made null
# constants without being decoded when they are (tables/trace.py ``null_columns``).
SPARSE: dict[str, tuple[str, ...]] = {
    "kernels": ("graph_id", "graph_node_id"),
    "ops": ("input_dims", "input_types", "concrete_inputs"),
}


def store_derived(root: Path, trace_id: str) -> None:
    """Compute the derived tables of the trace ``trace_id`` of the dataset ``root`` and store them
    (each partition written to a temporary name and renamed; ``derived_key`` removed first and
    written last, so an interruption leaves tables without a key, which are never read). Under
    the trace's writer lock, not waited for: DatasetError while another writer holds it."""

    with trace_lock(root, trace_id, wait_s=0):
        remove_partition(root, d.KEY, trace_id)
        trace = read_dataset(root, trace_id, columns=ATTRIBUTION_COLUMNS, sparse=SPARSE)
        rows = {n: trace.table(n).height for n in d.CANONICAL}
        att = attribute(trace, release=True)  # the kernels, launches and ops go once taken
        del trace
        cpu_only, tree, acts = bool(att.cpu_only), att.region_tree, att.activities
        put(root, d.LINKS, trace_id, att.region_links)
        del att
        if not cpu_only:  # the activities' names: the kernels' (a CPU-only trace's are its ops')
            kernels = root / "kernels" / f"trace_id={trace_id}" / DATA_FILE
            names = pl.read_parquet(kernels, columns=["name"])["name"].cast(pl.String())
            # by act_id (= the kernels row), as read_derived gathers them: the activities come in
            # act_id order, so this is the column as read, but no order is assumed
            acts = acts.with_columns(take(names.rechunk(), acts["act_id"]).alias("name"))
            del names
        stored = put(root, d.ACTIVITIES, trace_id, acts)
        del acts
        trace = read_dataset(root, trace_id, columns=COSTS_COLUMNS, sparse=SPARSE, tables=COSTS_COLUMNS)
        costs = trace_costs(trace, launched=pl.scan_parquet(stored).select("op_id", "name"))
        put(root, d.COSTS, trace_id, costs.select("op_id", *[c for c in d.COST_COLUMNS if c in costs.columns]))
        del costs
        put(root, d.LABELS, trace_id, label_regions(trace, tree=tree).drop("trace_id", strict=False))
        written = {n: list(pl.read_parquet_schema(root / n / f"trace_id={trace_id}" / DATA_FILE)) for n in d.STORED}
        put(root, d.KEY, trace_id, d.key_frame(cpu_only, rows, written))


def put(root: Path, name: str, trace_id: str, frame: pl.DataFrame) -> Path:
    """Write ``frame`` as the partition of ``trace_id`` in the table ``name`` of ``root``: to a
    temporary folder, then renamed over the old partition. The file's path."""

    dest = root / name / f"trace_id={trace_id}"
    tmp = root / name / f".tmp-{trace_id}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        write_part(frame, tmp / DATA_FILE)
        remove_partition(root, name, trace_id)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest / DATA_FILE
