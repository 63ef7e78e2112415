"""A dataset's own files, checked as they are read: a trace's partitions and ``meta`` must be as
tracekit writes them, or the read ends in one :class:`DatasetError` line naming the table, the
trace and what is wrong (docs/robustness.md, "A dataset's own files").

- ``meta``: one row; ``meta_json`` a JSON object; ``schema_version`` the one this tracekit reads
  (a dataset written by a newer one is refused, not read as current); the fields readers use
  (``devices``, ``threads``, ``parse_stats``, ``warnings``, ``distributed``, ``extra``) of their
  type.
- a canonical table: its required columns (:data:`REQUIRED`: times and ids) present and never
  null; a canonical column missing while the file holds columns tracekit never writes (renamed
  columns) is named too. Other canonical columns missing from an older dataset read as null.

The derived tables are a cache: a stored one that does not match what its key recorded is
recomputed instead (tracekit/analysis/store/derived.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tracekit.numbers import plural
from tracekit.errors import DatasetError
from tracekit.tables import schema

# Columns every row of a canonical table has (times, and the ids others refer to).
REQUIRED: dict[str, tuple[str, ...]] = {
    "kernels": ("start_ns", "end_ns"),
    "launches": ("start_ns", "end_ns"),
    "ops": ("op_id", "start_ns", "end_ns"),
    "regions": ("region_id", "start_ns", "end_ns"),
    "memory": ("time_ns",),
}
# meta fields: the JSON types readers expect (None is accepted for each)
META_TYPES: dict[str, type | tuple[type, ...]] = {
    "devices": list,
    "threads": list,
    "parse_stats": dict,
    "warnings": list,
    "distributed": dict,
    "extra": dict,
    "model": dict,
    "layout": dict,
}
# meta fields whose integers readers use as sizes and ranks: each within [0, 2^31) (a dataset
# written before they were checked on the way in may hold 10^309 or 2^70; every analysis of it
# then crashed)
BOUNDED = ("model", "distributed", "layout")
_MAX_INT = (1 << 31) - 1


def _where(root: Path, table: str, tid: str) -> str:
    return f"{root}: table {table!r} of trace {tid!r}"


def _names(cols: Collection[str]) -> str:
    cols = list(cols)
    return ", ".join(cols[:6]) + (f", … ({len(cols)} in all)" if len(cols) > 6 else "")


def check_columns(root: Path, table: str, tid: str, have: Collection[str]) -> None:
    """DatasetError when the file of ``table`` lacks a required column, or lacks canonical ones
    while holding others (renamed)."""
    if not have:  # a file with no columns: an empty table
        return
    canon = [c for c in schema.ALL_TABLES[table] if c != "trace_id"]
    missing = [c for c in canon if c not in have]
    extra = [c for c in have if c not in canon and c != "trace_id"]
    if missing and (extra or set(missing) & set(REQUIRED[table])):
        raise DatasetError(
            f"{_where(root, table, tid)} is not as tracekit writes it: "
            f"{plural(len(missing), 'column')} {_names(missing)} missing"
            + (f", unknown {plural(len(extra), 'column')} {_names(extra)}" if extra else "")
            + "; re-ingest the trace"
        )


def check_nulls(root: Path, table: str, tid: str, nulls: dict[str, int]) -> None:
    """DatasetError when a required column of ``table`` holds nulls (``nulls``: column → count)."""
    bad = {c: n for c, n in nulls.items() if n and c in REQUIRED[table]}
    if bad:
        what = ", ".join(f"{c} ({n:,} rows)" for c, n in bad.items())
        raise DatasetError(
            f"{_where(root, table, tid)} has nulls in {what}, never null as written; re-ingest the trace"
        )


def check_meta(root: Path, tid: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace's meta dict from the rows of its ``meta`` file (``meta_json`` and, where stored,
    ``schema_version``); DatasetError naming what is wrong."""
    where = f"{root}: the meta of trace {tid!r}"
    if len(rows) != 1:
        raise DatasetError(f"{where} holds {len(rows)} rows, not one; re-ingest the trace")
    text = rows[0].get("meta_json")
    if not isinstance(text, str):
        raise DatasetError(f"{where} has no meta_json text; re-ingest the trace")
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):
        raise DatasetError(f"{where} is not JSON; re-ingest the trace") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"{where} is not a JSON object; re-ingest the trace")
    for version in (rows[0].get("schema_version"), meta.get("schema_version")):
        if version is None:
            continue
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise DatasetError(f"{where}: schema_version {version!r} is not a schema version")
        if version != schema.SCHEMA_VERSION:
            newer = "a newer" if version > schema.SCHEMA_VERSION else "an older"
            raise DatasetError(
                f"{where}: schema_version {version} (written by {newer} tracekit; this one reads "
                f"{schema.SCHEMA_VERSION}); re-ingest the trace"
            )
    for key, kind in META_TYPES.items():
        v = meta.get(key)
        if v is not None and not isinstance(v, kind):
            raise DatasetError(f"{where}: {key!r} is a {type(v).__name__}, not a {getattr(kind, '__name__', kind)}")
    for key in ("devices", "threads"):
        if any(not isinstance(x, dict) for x in meta.get(key) or []):
            raise DatasetError(f"{where}: {key!r} holds an item that is not an object")
    if any(not isinstance(w, str) for w in meta.get("warnings") or []):
        raise DatasetError(f"{where}: 'warnings' holds an item that is not text")
    for key in BOUNDED:
        bad = [k for k, v in (meta.get(key) or {}).items() if not _bounded(v)]
        if bad:
            raise DatasetError(
                f"{where}: {key}.{bad[0]} is out of range (not an integer in [0, 2^31)); re-ingest the trace"
            )
    return meta


def _bounded(v: Any) -> bool:
    """A meta value a reader can use: an integer in [0, 2^31), a finite float, or anything else."""
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return 0 <= v <= _MAX_INT
    if isinstance(v, float):
        return math.isfinite(v)
    return True
