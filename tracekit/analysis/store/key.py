"""The key of a trace's derived tables (tracekit/analysis/store/derived.py): the tables' names, the
canonical tables they are computed from, and :func:`derived_key`, which names the code that
computed them (tracekit version, schema version, the format number below, and a hash of the source
of the modules that decide them). Read by the store and by the code that computes the tables."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import polars as pl

from tracekit.tables import schema
from tracekit import __version__

DERIVED_FORMAT = 2  # 2: the key holds the stored tables' column names
ACTIVITIES, LINKS, LABELS, COSTS, KEY = (
    "attribution_activities",
    "attribution_links",
    "region_labels",
    "op_costs",
    "derived_key",
)
DERIVED_TABLES = (ACTIVITIES, LINKS, LABELS, COSTS, KEY)
STORED = (ACTIVITIES, LINKS, LABELS, COSTS)  # the tables the key describes
# Columns that hold no null in a derived table as written: a file with nulls there is not read.
NOT_NULL = {ACTIVITIES: ("act_id",), LINKS: ("act_id", "region_id"), LABELS: ("region_id",), COSTS: ("op_id",)}
COST_COLUMNS = ("flops", "bytes", "cost_model", "dtype", "covered", "cost_note")
# Code that decides the derived tables: every module of these packages (and these files) has its
# source hashed into the key, so a new, moved or edited module there invalidates stored tables.
# The list names folders, not modules: nothing to keep in step by hand when files move.
SOURCE_PACKAGES = ("tables", "attribution", "labels", "costmodel")
SOURCE_FILES = (
    "annotate.py",
    "conventions.py",
    "analysis/store/key.py",
    "analysis/store/derived.py",
    "analysis/store/compute.py",
)
CANONICAL = ("kernels", "launches", "ops", "regions")


def source_files() -> list[Path]:
    """The files whose content is hashed into :func:`derived_key`, in a fixed order."""
    pkg = Path(__file__).resolve().parents[2]
    files = [f for d in SOURCE_PACKAGES for f in (pkg / d).rglob("*.py")]
    files += [pkg / f for f in SOURCE_FILES]
    return sorted(files, key=lambda f: f.relative_to(pkg).as_posix())


@lru_cache(maxsize=1)
def derived_key() -> str:
    """``tracekit <version>; schema <n>; derived <n>; code <sha256 prefix>`` — the code hash covers
    the path and content of every :func:`source_files` file."""

    pkg = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for f in source_files():
        h.update(f.relative_to(pkg).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return (
        f"tracekit {__version__}; schema {schema.SCHEMA_VERSION}; derived {DERIVED_FORMAT}; code {h.hexdigest()[:16]}"
    )


def key_frame(cpu_only: bool, rows: dict[str, int], columns: dict[str, list[str]]) -> pl.DataFrame:
    """The ``derived_key`` table: one row of the running code's key, ``cpu_only``, the canonical
    tables' row counts and the stored derived tables' column names (JSON: table → names), so a
    table whose columns were renamed or dropped after the key was written is not read."""
    return pl.DataFrame(
        {
            "key": [derived_key()],
            "cpu_only": [cpu_only],
            **{f"{n}_rows": [rows[n]] for n in CANONICAL},
            "columns": [json.dumps(columns, sort_keys=True)],
        }
    )
