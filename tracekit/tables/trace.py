"""The ``Trace`` model: canonical tables + metadata + parse statistics, and its Parquet round trip.

Dataset layout (hive style, one partition per trace, so many traces scan together)::

    DIR/kernels/trace_id=<id>/data.parquet
    DIR/launches/trace_id=<id>/data.parquet
    DIR/ops/trace_id=<id>/data.parquet
    DIR/regions/trace_id=<id>/data.parquet
    DIR/meta/trace_id=<id>/data.parquet      # one row; written last = the commit marker

A trace whose ``meta`` partition is missing was interrupted mid-write and is ignored with a
warning. ``trace_id`` is not stored inside the files: readers get it from the directory name.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.tables import check, schema
from tracekit.tables.dictstr import dictionary_columns, write_dictionaries
from tracekit.errors import DatasetError
from tracekit.inputs import check_regular, why
from tracekit.tables.staging import discard_staging, open_staging, writing

from tracekit.tables.layout import DATA_FILE, META_TABLE, choose_trace, dataset_trace_ids, is_dataset
from tracekit.tables.parquet_read import BY_COLUMN_BYTES, by_column, null_columns, settled

__all__ = [
    "DATA_FILE",
    "META_TABLE",
    "Trace",
    "dataset_trace_ids",
    "is_dataset",
    "null_columns",
    "read_dataset",
    "settled",
    "write_dataset",
    "write_part",
]

# zstd at level 1: writes faster than at polars' default level, and the files are no larger; zstd
# decompresses at the same speed whatever the level. docs/schema.md.
PARQUET_ZSTD_LEVEL = 1


def write_part(frame: pl.DataFrame, path: Path) -> None:
    """Write one partition file of a dataset: Parquet, zstd level :data:`PARQUET_ZSTD_LEVEL`,
    with column statistics (readers skip row groups by them)."""
    long_repeated = dictionary_columns(frame)  # e.g. one long name on every row: not copied per row
    if long_repeated:
        write_dictionaries(frame, path, long_repeated, PARQUET_ZSTD_LEVEL)
        return
    frame.write_parquet(path, compression="zstd", compression_level=PARQUET_ZSTD_LEVEL, statistics=True)


# Meta keys a reader adds (where the trace was read from, which columns): never written back.
READER_NOTES = ("dataset_path", "dataset_columns", "dataset_rows", "model_option")


@dataclass
class Trace:
    """One trace in canonical form.

    ``meta`` keys (all loaders fill what they know; see docs/schema.md):
    ``trace_id``, ``source`` (path), ``format`` (``kineto`` | ``nsys``), ``format_version``,
    ``schema_version``, ``devices`` (list of device-property dicts: ``id``, ``name``,
    ``num_sms``, ``memory_bandwidth_bytes_per_s``, ...), ``distributed`` (``rank``,
    ``world_size``, ``backend``), ``time_base_ns``, ``threads`` (list of ``pid``, ``tid``,
    ``name``), ``parse_stats`` (``events_read``, ``events_kept``, ``dropped``: reason → count),
    ``warnings`` (list of one-line strings), ``extra`` (free-form metadata of the source).
    """

    kernels: pl.DataFrame
    launches: pl.DataFrame
    ops: pl.DataFrame
    regions: pl.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    # optional (schema.OPTIONAL_TABLES): allocations and frees, empty when none were recorded
    memory: pl.DataFrame = field(default_factory=lambda: schema.empty("memory"))

    @property
    def trace_id(self) -> str:
        return str(self.meta.get("trace_id", ""))

    @property
    def is_cpu_only(self) -> bool:
        """True when the trace holds no device activity: analyses then use leaf CPU ops."""
        return self.kernels.height == 0

    @property
    def read_in_part(self) -> bool:
        """True for a trace read from a dataset with only some columns or rows (``read_dataset``'s
        ``columns`` / ``rows``): enough for the reader that asked, never a source of other tables."""
        return self.meta.get("dataset_columns") is not None or self.meta.get("dataset_rows") is not None

    def table(self, name: str) -> pl.DataFrame:
        frame: pl.DataFrame = getattr(self, name)
        return frame

    def warnings(self) -> list[str]:
        return list(self.meta.get("warnings", []))

    def __repr__(self) -> str:
        """A few lines: id, source, devices, rows per table, warnings (not the frames themselves)."""
        m = self.meta
        devices = (
            ", ".join(str(d.get("name")) for d in m.get("devices") or [] if isinstance(d, dict)) or "none recorded"
        )
        lines = [
            f"Trace({self.trace_id!r}, format={m.get('format')!r}, source={m.get('source')!r})",
            f"  devices: {devices}" + ("  (CPU only: no device activity)" if self.is_cpu_only else ""),
        ]
        for name in written_tables(self):
            df = self.table(name)
            lines.append(f"  {name:<9}{df.height:>12,} rows × {df.width} columns")
        warns = self.warnings()
        lines += [f"  warning: {w}" for w in warns[:3]] + (
            [f"  … {len(warns) - 3} more warnings"] if len(warns) > 3 else []
        )
        return "\n".join(lines)


def meta_frame(meta: dict[str, Any]) -> pl.DataFrame:
    """One-row frame holding the metadata: a few typed columns for scans, and the full JSON.
    ``source`` is stored as an absolute path: a dataset's analysis finds the runner's sidecar
    beside it from whatever directory it runs (a relative path found none, or an unrelated
    file of the same name, depending on the current directory)."""
    if meta.get("source"):
        meta = {**meta, "source": os.path.abspath(str(meta["source"]))}
    dist = meta.get("distributed") or {}
    devices = meta.get("devices") or []
    stats = meta.get("parse_stats") or {}
    notes = json.dumps({k: v for k, v in meta.items() if k not in READER_NOTES}, sort_keys=True, default=str)
    cols: dict[str, tuple[pl.DataType, Any]] = {  # column: (dtype, value)
        "source": (pl.String(), str(meta.get("source", ""))),
        "format": (pl.String(), str(meta.get("format", ""))),
        "schema_version": (pl.Int64(), int(meta.get("schema_version", schema.SCHEMA_VERSION))),
        "rank": (pl.Int64(), dist.get("rank")),
        "world_size": (pl.Int64(), dist.get("world_size")),
        "device_name": (pl.String(), devices[0].get("name") if devices else None),
        "events_read": (pl.Int64(), stats.get("events_read")),
        "events_kept": (pl.Int64(), stats.get("events_kept")),
        "meta_json": (pl.String(), notes),
    }
    return pl.DataFrame({c: [v] for c, (_, v) in cols.items()}, schema={c: t for c, (t, _) in cols.items()})


def write_dataset(
    trace: Trace,
    out_dir: str | os.PathLike[str],
    extra: dict[str, pl.DataFrame] | Callable[[], dict[str, pl.DataFrame]] | None = None,
) -> Path:
    """Write ``trace`` into the dataset at ``out_dir`` atomically; replaces an earlier ingest.

    Each partition is written into a staging directory and renamed into place; ``meta`` goes
    last, so a reader never sees a trace without all of its tables. ``extra``: more tables of
    this trace (name → frame, e.g. the derived tables of tracekit/analysis/store/derived.py), written the same
    way before ``meta``; partitions of this trace in other tables than those written are removed.
    ``extra`` may be a function that computes them: it then runs while a thread writes the
    canonical tables (polars writes without the GIL), and what it raises is raised as it is, with
    nothing committed. Returns ``out_dir``.
    """
    out = Path(out_dir)
    tid = trace.trace_id
    if not tid:
        raise DatasetError("trace has no trace_id; cannot write it to a dataset")
    out, staging = open_staging(out, tid)

    def canonical() -> None:
        with writing(out):
            for name in written_tables(trace):
                stage(staging, name, trace.table(name).drop("trace_id"))
            stage(staging, META_TABLE, meta_frame(trace.meta))

    try:
        if callable(extra):
            with ThreadPoolExecutor(1, thread_name_prefix="tracekit-write") as pool:
                written = pool.submit(canonical)
                extras = dict(extra())  # on the way out (also when this raises) the writes finish
            written.result()
        else:
            canonical()
            extras = dict(extra or {})
        with writing(out):
            for name, frame in extras.items():
                stage(staging, name, frame.drop("trace_id", strict=False))
            commit_staged(out, staging, tid, [*written_tables(trace), *extras])
    finally:
        discard_staging(staging)
    return out


def stage(staging: Path, table: str, frame: pl.DataFrame) -> None:
    """Write ``frame`` as the staged partition of ``table``."""
    (staging / table).mkdir()
    write_part(frame, staging / table / DATA_FILE)


def written_tables(trace: Trace) -> list[str]:
    """The tables of ``trace`` a dataset stores: every canonical one, and each optional one that
    has rows."""
    return [*schema.TABLES, *(n for n in schema.OPTIONAL_TABLES if trace.table(n).height)]


def commit_with_meta(out: Path, staging: Path, tid: str, meta: dict[str, Any]) -> None:
    """Stage ``meta`` and commit the canonical tables staged beside it (:func:`commit_staged`),
    and the optional ones staged. Output errors are DatasetErrors."""
    with writing(out):
        stage(staging, META_TABLE, meta_frame(meta))
        optional = [n for n in schema.OPTIONAL_TABLES if (staging / n).is_dir()]
        commit_staged(out, staging, tid, [*schema.TABLES, *optional])


def commit_staged(out: Path, staging: Path, tid: str, tables: list[str]) -> None:
    """Move a trace's staged partitions (``staging/<table>`` and ``staging/meta``) into the
    dataset at ``out``, ``meta`` last. This trace's partitions in tables not written this time
    (e.g. derived tables of an earlier ingest) are removed first, so nothing stale survives.
    Nothing of the previous copy is removed before the new one is completely staged: its
    ``meta`` goes first here (readers then ignore the trace until the new ``meta`` lands). The
    caller holds the trace's writer lock (tracekit/tables/locks.py), so no other writer's commit
    interleaves with this one."""
    remove_partition(out, META_TABLE, tid)
    written = {*tables, META_TABLE}
    for stale in out.glob(f"*/trace_id={tid}"):
        if stale.parent.name not in written and not stale.parent.name.startswith("."):
            shutil.rmtree(stale, ignore_errors=True)
    for name in [*tables, META_TABLE]:
        dest = out / name / f"trace_id={tid}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        remove_partition(out, name, tid)
        os.replace(staging / name, dest)


def remove_partition(out: Path, table: str, tid: str) -> None:
    dest = out / table / f"trace_id={tid}"
    if dest.exists():
        shutil.rmtree(dest)


def read_dataset(
    path: str | os.PathLike[str],
    trace_id: str | None = None,
    columns: Mapping[str, Collection[str]] | None = None,
    rows: Mapping[str, pl.Expr] | None = None,
    sparse: Mapping[str, Collection[str]] | None = None,
    tables: Collection[str] | None = None,
) -> Trace:
    """Read one trace back from a dataset. With several traces in it, ``trace_id`` picks one: its
    full id or a prefix that only one id of the dataset starts with.

    For a reader that knows what it needs, e.g. the analysis of a trace whose derived tables are
    stored (tracekit/analysis/store/derived.py): ``columns``, for each canonical table named, the only
    columns read from its file; the others are null constants that hold no memory per row (the
    tables keep their canonical schema), and ``meta["dataset_columns"]`` records the choice.
    ``rows``: for each table named, a predicate; only its rows are read, and
    ``meta["dataset_rows"]`` holds the table's full row count. ``sparse``: for each table named,
    those of its ``columns`` that are often all null (e.g. the ops' shapes): each that is, in this
    trace, becomes a null constant without being decoded (:func:`null_columns`). ``tables``: only
    these tables are read; the others are empty (with ``columns``, for such a reader)."""
    root = Path(path)
    trace_id = choose_trace(root, dataset_trace_ids(root), trace_id)
    scans: list[pl.LazyFrame] = []
    files: dict[str, Path] = {}
    for name in schema.TABLES:
        f = files[name] = root / name / f"trace_id={trace_id}" / DATA_FILE
        _check_partition(root, f, name, trace_id)
        chosen = None if columns is None else columns.get(name)
        if chosen is not None and sparse and name in sparse:
            chosen = set(chosen) - null_columns(f, [c for c in sparse[name] if c in chosen])
        scan = _conformed_scan(f, name, trace_id, chosen)
        if tables is not None and name not in tables:
            scan = scan.clear()
        scans.append(scan.filter(rows[name]) if rows and name in rows else scan)
    filtered = [n for n in schema.TABLES if rows and n in rows]
    scans += [pl.scan_parquet(files[n]).select(pl.len()) for n in filtered]
    scans.append(_meta_scan(root, trace_id))
    n = len(schema.TABLES)
    keep = columns is not None or rows is not None  # a reader that keeps the tables: empty columns hold no memory
    if keep:
        # one table at a time, each settled before the next is read: the decoding of all five
        # at once, then their copies, raised a big trace's peak
        *counts, mf = pl.collect_all(scans[n:])
        frames = [
            by_column(scans[i], _read_columns(name, columns))
            if not (rows and name in rows) and files[name].stat().st_size >= BY_COLUMN_BYTES
            else settled(scans[i].collect(), _read_columns(name, columns), constants=True)
            for i, name in enumerate(schema.TABLES)
        ]
    else:  # one engine call reads and conforms the five files together (was 5 reads + 8 eager steps)
        *frames, mf = pl.collect_all(scans)
        counts, frames = frames[n:], frames[:n]
        for i, name in enumerate(schema.TABLES):  # in place: two copies of one column at most
            frames[i] = settled(frames[i], _read_columns(name, None), constants=False)
    for name, frame in zip(schema.TABLES, frames):  # the required columns read: never null
        read = [c for c in _read_columns(name, columns) if c in check.REQUIRED[name]]
        check.check_nulls(root, name, trace_id, {c: frame[c].null_count() for c in read})
    by_name = dict(zip(schema.TABLES, frames))
    meta = check.check_meta(root, trace_id, mf.to_dicts())
    meta["trace_id"] = trace_id
    meta["dataset_path"] = str(root)  # lets analyses find stored derived tables; never written back
    if columns is not None:
        meta["dataset_columns"] = {t: sorted(c) for t, c in columns.items()}
    if filtered:
        meta["dataset_rows"] = {n: int(c.item()) for n, c in zip(filtered, counts)}
    for name in schema.OPTIONAL_TABLES:  # absent in datasets without it (and those written before it)
        if tables is None or name in tables:
            by_name[name] = read_optional(root, name, trace_id)
    return Trace(meta=meta, **by_name)


def read_optional(root: Path, table: str, trace_id: str) -> pl.DataFrame:
    """An optional table of one trace: empty (canonical schema) when the dataset has none."""
    f = root / table / f"trace_id={trace_id}" / DATA_FILE
    if not f.exists():
        return schema.empty(table).with_columns(pl.lit(trace_id, dtype=pl.String()).alias("trace_id"))
    _check_partition(root, f, table, trace_id)
    frame = _conformed_scan(f, table, trace_id).collect()
    check.check_nulls(root, table, trace_id, {c: frame[c].null_count() for c in check.REQUIRED[table]})
    return frame


def _meta_scan(root: Path, trace_id: str) -> pl.LazyFrame:
    """The trace's ``meta`` file: ``meta_json`` and ``schema_version`` (where stored)."""
    f = root / META_TABLE / f"trace_id={trace_id}" / DATA_FILE
    _check_partition(root, f, META_TABLE, trace_id)
    lf = pl.scan_parquet(f)
    have = lf.collect_schema()
    if "meta_json" not in have:
        raise DatasetError(f"{root}: the meta of trace {trace_id!r} has no meta_json column; re-ingest the trace")
    return lf.select([c for c in ("meta_json", "schema_version") if c in have])


def _check_partition(root: Path, f: Path, table: str, trace_id: str) -> None:
    """A partition file is read only when it is a regular file (a FIFO there would block the
    Parquet reader forever, a device link read without end): DatasetError otherwise."""
    try:
        check_regular(f)
    except FileNotFoundError:
        raise DatasetError(f"{root}: table {table!r} is missing for trace {trace_id!r}") from None
    except OSError as exc:
        raise DatasetError(f"{root}: table {table!r} of trace {trace_id!r}: {f.name} {why(exc)}") from None


def _read_columns(table: str, columns: Mapping[str, Collection[str]] | None) -> list[str]:
    """The columns of ``table`` that :func:`read_dataset` reads from its file (the others are
    constants: ``trace_id``, and with ``columns`` those not chosen)."""
    chosen = None if columns is None else columns.get(table)
    return [c for c in schema.TABLES[table] if c != "trace_id" and (chosen is None or c in chosen)]


def _conformed_scan(f: Path, table: str, trace_id: str, keep: Collection[str] | None = None) -> pl.LazyFrame:
    """:func:`schema.conform` of the file ``f`` as a lazy query (canonical columns in order and
    dtype, missing ones null, ``trace_id`` filled); with ``keep``, only those columns are read
    and the others are null."""
    lf = pl.scan_parquet(f)
    names = lf.collect_schema().names()
    check.check_columns(f.parent.parent.parent, table, trace_id, names)  # named in the file's order
    have = set(names)
    if not have:  # no columns: conform's own empty-frame case
        return schema.conform(pl.DataFrame(), table, trace_id).lazy()
    if keep is not None:  # at least one column read, or the null constants would make one row
        have = (have & set(keep)) or {min(have)}
    cols = [
        pl.lit(trace_id, dtype=pl.String()).alias(c)
        if c == "trace_id"
        else pl.col(c).cast(t, strict=False)
        if c in have
        else pl.lit(None, dtype=t).alias(c)
        for c, t in schema.ALL_TABLES[table].items()
    ]
    return lf.select(cols)


def scan_table(path: str | os.PathLike[str], table: str) -> pl.LazyFrame:
    """Lazily scan ``table`` across every complete trace of a dataset (``trace_id`` column included)."""
    root = Path(path)
    ids = dataset_trace_ids(root)
    if not ids:
        raise DatasetError(f"{root}: no complete trace in this dataset")
    files = [str(root / table / f"trace_id={i}" / DATA_FILE) for i in ids]
    return pl.scan_parquet(files, hive_partitioning=True)
