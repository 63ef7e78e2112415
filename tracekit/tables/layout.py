"""The dataset's folder layout, readable without polars: table folders, the ``meta`` commit
marker, which traces a dataset holds. (tracekit/tables/trace.py reads and writes the tables.)

    DIR/<table>/trace_id=<id>/data.parquet     # meta written last: a trace without it is ignored

Commands that only need to know what a dataset holds (ingest's refusal of held traces, a stored
analysis result's lookup, sniffing a path) use this module and so never import polars — whose
thread pool, once a process has one, also rules out forking Dask workers from it
(tracekit/parallel.py).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_FILE = "data.parquet"
META_TABLE = "meta"


def is_dataset(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory written by :func:`tracekit.tables.trace.write_dataset`."""
    return (Path(path) / META_TABLE).is_dir()


def dataset_trace_ids(path: str | os.PathLike[str]) -> list[str]:
    """Trace ids fully written in the dataset (those with a ``meta`` partition), sorted."""
    meta_dir = Path(path) / META_TABLE
    if not meta_dir.is_dir():
        return []
    ids = []
    for d in meta_dir.iterdir():
        if d.name.startswith("trace_id=") and (d / DATA_FILE).is_file():
            ids.append(d.name.split("=", 1)[1])
    return sorted(ids)
