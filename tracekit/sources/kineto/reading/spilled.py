"""Finishing a spilled Kineto table in parts, with memory bounded by a few slim columns.

The streamed ingest spills each built batch of a table to an Arrow IPC file (``Collector``). What
needs the whole table — duplicates, the row ids, the nesting of ops and regions — is worked out
on a slim read of it (the duplicate-key hash, the times and the nesting keys: 32–48 bytes a row,
not the ~270 of a finished op; the native nesting then needs about as much again); the files are
then read back one at a time, their rows kept or dropped, the time base added and the ids, depths
and parents of the slim pass attached, and the rows handed on in parts of about
:data:`PART_ROWS`. The parts, one after another, equal
:func:`tracekit.sources.kineto.reading.finish.finish_table` of the whole table (tested): same
rows, same order (file order), same ids and counts.

Batches out of file order (events the native scanner left to Python are built apart from their
window) need a sort of the whole table: then the caller finishes it whole, as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from tracekit.tables.depth_cap import DEEP_REASON, MAX_REGION_DEPTH
from tracekit.sources.kineto.reading import native as kineto_native
from tracekit.sources.kineto.reading.finish import DEDUPE_KEYS, WHAT, in_range, native_nested, nested, shared_strings

# The columns ops and regions nest within (their ids, depths and parents come from the slim pass).
NEST_GROUPS: dict[str, tuple[list[str], str]] = {
    "ops": (["pid", "tid"], "op_id"),
    "regions": (["kind", "pid", "tid"], "region_id"),
}
PART_ROWS = 1 << 16  # rows handed on at a time (a Parquet row group each)


def in_file_order(files: list[Path]) -> bool:
    """Whether the rows of ``files``, one after another, are in file order (``_ev`` ascending)."""
    ev = pl.concat([pl.read_ipc(f, columns=["_ev"])["_ev"] for f in files])
    return bool(ev.is_sorted())


def finish_parts(files: list[Path], table: str, base_ns: int, dropped: Counter[str]) -> Iterator[pl.DataFrame]:
    """The finished ``table`` (its columns before ``schema.conform``), in parts, from its spilled
    batches ``files`` (in file order: :func:`in_file_order`), each file removed once read."""
    group, id_col = NEST_GROUPS.get(table, ([], ""))
    slims = [pl.read_ipc(f, columns=["_key", "start_ns", "end_ns", *group]) for f in files]
    heights = [s.height for s in slims]
    slim = pl.concat(slims, rechunk=True)  # one chunk: the nesting passes its columns to C without a copy more
    del slims
    if group == ["pid", "tid"] and _fits_32_bits(slim, group):  # one nesting key instead of two
        slim = slim.select("_key", "start_ns", "end_ns", (pl.col("pid") * (1 << 32) + pl.col("tid")).alias("_thread"))
        group = ["_thread"]
    keep = ~_duplicates(files, heights, slim.drop_in_place("_key"), table, dropped)
    slim = slim.filter(keep)
    if base_ns:
        inside = in_range(slim, base_ns, dropped, WHAT[table])
        if inside is not None:
            keep = keep.scatter(keep.arg_true(), inside)  # the rows kept so far, narrowed to those in range
            slim = slim.filter(inside)
    attach = pl.DataFrame()
    if group:
        times = [(pl.col(c) + base_ns).alias(c) for c in ("start_ns", "end_ns")] if base_ns else []
        slim = slim.with_columns(*times)
        if kineto_native.available() and slim.height:  # (no id column: the id is the row number)
            attach = pl.DataFrame(native_nested(slim, group))
        else:
            attach = nested(slim, group, id_col).select("depth", "parent_id")
        if table == "regions":
            deep = int((attach["depth"] >= MAX_REGION_DEPTH).sum())
            if deep:
                dropped[f"{WHAT[table]}: {DEEP_REASON}"] += deep
    del slim
    pending: list[pl.DataFrame] = []
    rows = kept = 0
    for f, height in zip(files, heights):
        df = pl.read_ipc(f)
        f.unlink()
        df = df.filter(keep.slice(rows, height)).drop("_key")
        rows += height
        if group:
            ids = pl.int_range(kept, kept + df.height, dtype=pl.Int64(), eager=True).alias(id_col)
            df = df.hstack([ids, *attach.slice(kept, df.height)])
            kept += df.height
        pending.append(_finished(df, table, base_ns))
        if sum(p.height for p in pending) >= PART_ROWS:
            yield pl.concat(pending)
            pending = []
    if pending:
        yield pl.concat(pending)


def _fits_32_bits(slim: pl.DataFrame, columns: list[str]) -> bool:
    """Whether ``columns`` hold no nulls and only values in [0, 2^31): then ``pid * 2^32 + tid``
    tells the threads apart as the pair does (the nesting groups by equal keys only)."""
    ok = [pl.col(c).is_not_null().all() & (pl.col(c).min() >= 0) & (pl.col(c).max() < (1 << 31)) for c in columns]
    return slim.height > 0 and all(slim.select(ok).row(0))


def _duplicates(
    files: list[Path], heights: list[int], key_hash: pl.Series, table: str, dropped: Counter[str]
) -> pl.Series:
    """Which rows repeat an earlier one (all of ``DEDUPE_KEYS`` equal), counted in ``dropped``.
    Sorted hashes find the candidates (8 bytes a row); only their full keys are read back, so a
    hash collision never drops an event."""
    keys = key_hash.sort()
    repeated = keys.filter(keys == keys.shift(1)).unique().implode()
    del keys
    dup = pl.repeat(False, key_hash.len(), dtype=pl.Boolean(), eager=True)
    if repeated.list.len().item() == 0:
        return dup
    key = DEDUPE_KEYS[table]
    cand, offset = [], 0
    for f, height in zip(files, heights):
        df = pl.read_ipc(f, columns=[*key, "_key"]).with_row_index("_row", offset)
        cand.append(df.filter(df["_key"].is_in(repeated)).drop("_key"))
        offset += height
    rows = pl.concat(cand).filter(~pl.struct(key).is_first_distinct())["_row"]
    if rows.len():
        dropped[f"{WHAT[table]}: duplicate event"] += rows.len()
        dup = dup.scatter(rows, True)
    return dup


def _finished(df: pl.DataFrame, table: str, base_ns: int) -> pl.DataFrame:
    """One file's kept rows: the time base added, names as text, the regions' depth cap."""
    times = [(pl.col(c) + base_ns).alias(c) for c in ("start_ns", "end_ns")] if base_ns else []
    df = df.with_columns(*times, shared_strings(df["name"]).alias("name"))
    if table != "regions":
        return df.drop("_ev")
    # regions keep it: `tracekit label` patches each region's own event by this index
    return df.filter(~(pl.col("depth") >= MAX_REGION_DEPTH).fill_null(False)).rename({"_ev": "event_index"})
