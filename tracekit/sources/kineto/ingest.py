"""Bounded-memory ingest of a Kineto trace straight into a Parquet dataset.

:func:`tracekit.sources.kineto.loader.load_kineto` holds every table in memory (what analyses want).
:func:`ingest_kineto` reads the same events the same way but spills each built batch to an Arrow
IPC file in the staging directory, then finishes the tables one at a time (drop duplicates, add
the time base, nest: worked out on a slim read of the table, then applied one spilled file at a
time, tracekit/sources/kineto/reading/finish.py) and writes each as its Parquet partition, part by
part. Peak memory is the reading windows or a few slim columns of the largest table (about 40
bytes an op), not the table. The dataset layout and commit protocol are those of
:func:`tracekit.tables.trace.write_dataset` (tables staged, ``meta`` last); the tables are equal
to ``load_kineto``'s (tested). Derived tables are not computed here: analyses compute them when
they are absent.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Any


from tracekit.conventions import OPTIONAL_TABLES
from tracekit.sources.kineto.loader import read_kineto
from tracekit.sources import guard
from tracekit.tables.staging import discard_staging, open_staging, writing
from tracekit.tables.trace import commit_with_meta
from tracekit.tables.parts import stage_parts
from tracekit.tables.ids import make_trace_id
from tracekit.tuning import release_heap


def ingest_kineto(
    path: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> tuple[dict[str, Any], dict[str, int]]:
    """Write the canonical tables of the Kineto trace at ``path`` into the dataset ``out_dir``;
    return its meta and table heights. Replaces an earlier ingest of the same trace id, derived
    tables included. Raises what ``load_kineto`` raises, and DatasetError for a bad ``out_dir``."""

    p = Path(path)
    with guard.reading(p):
        tid = make_trace_id(p)
    out, staging = open_staging(out_dir, tid)
    spill = staging / ".spill"
    try:
        with writing(out):
            spill.mkdir()
        with guard.reading(p):  # input errors name the file; output errors (DatasetError) pass
            reading = read_kineto(p, tid, spill_dir=spill)
            release_heap()
            for name, parts in reading.table_parts():
                if name in OPTIONAL_TABLES:
                    first = next((df for df in parts if df.height), None)
                    if first is None:  # written only with rows
                        continue
                    parts = itertools.chain([first], parts)
                stage_parts(staging, name, parts)  # one Parquet row group a part
                release_heap()
            meta = reading.meta()
        shutil.rmtree(spill, ignore_errors=True)
        commit_with_meta(out, staging, tid, meta)
    finally:
        discard_staging(staging)
    return meta, dict(reading.heights)
