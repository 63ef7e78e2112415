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
import shutil
from pathlib import Path

from tracekit.errors import DatasetError

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


def choose_trace(root: Path, ids: list[str], trace_id: str | None) -> str:
    """The trace of ``ids`` (the dataset's complete traces) that ``trace_id`` names: the id
    itself, or the one id it is a prefix of; with ``trace_id`` None, the only trace. DatasetError
    (one line naming the candidates) for none, an ambiguous prefix, or several traces unnamed."""
    if not ids:
        raise DatasetError(f"{root}: no complete trace in this dataset (no meta partition)")
    if trace_id is None:
        if len(ids) > 1:
            raise DatasetError(
                f"{root}: dataset holds {len(ids)} traces; choose one with trace_id= (first ones: {', '.join(ids[:5])})"
            )
        return ids[0]
    if trace_id in ids:
        return trace_id
    found = [i for i in ids if trace_id and i.startswith(trace_id)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise DatasetError(f"{root}: no trace {trace_id!r} in this dataset (ids: {_first(ids)})")
    raise DatasetError(f"{root}: trace id prefix {trace_id!r} is ambiguous: {_first(found)}")


def _first(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")


def remove_trace(root: Path, tid: str) -> None:
    """Remove every partition of trace ``tid`` from the dataset at ``root``, ``meta`` (the commit
    marker) first, so readers stop seeing the trace before its tables go."""
    shutil.rmtree(root / META_TABLE / f"trace_id={tid}", ignore_errors=True)
    for d in root.glob(f"*/trace_id={tid}"):
        shutil.rmtree(d, ignore_errors=True)
