"""Finishing a Kineto table once all its batches are in: duplicates dropped (counted), the time
base added, names shared, ops/regions nested (natively when the extension is built). Whole
(:func:`finish_table`), or in parts from spilled batches (:func:`finish_parts`: the streamed
ingest)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from tracekit.tables.depth_cap import DEEP_REASON, MAX_REGION_DEPTH, cap_region_depth
from tracekit.tables.intervals import SIBLING_OVERLAP_NS, nest
from tracekit.sources.kineto.reading import native as kineto_native

# Two events are duplicates when all of these agree (the name included).
DEDUPE_KEYS = {
    "kernels": ["kind", "name", "device", "stream", "start_ns", "end_ns", "correlation"],
    "launches": ["name", "pid", "tid", "start_ns", "end_ns", "correlation"],
    "ops": ["name", "pid", "tid", "start_ns", "end_ns", "external_id"],
    "regions": ["kind", "name", "pid", "tid", "start_ns", "end_ns"],
}
# Times (and durations) must stay within ±2^62 ns (±146 years) — relative, and again once the
# time base is added; events beyond are dropped and counted. Sums of two such values fit int64.
TIME_LIMIT_NS = 1 << 62
WHAT = {"kernels": "device activity", "launches": "runtime call", "ops": "cpu op", "regions": "annotation"}


def finish_table(df: pl.DataFrame, table: str, base_ns: int, dropped: Counter[str]) -> pl.DataFrame:
    """All batches of ``table`` (with the ``_key`` hash of ``DEDUPE_KEYS``) → the table."""
    df = _dedupe(df, DEDUPE_KEYS[table], dropped, WHAT[table]).drop("_key")
    if base_ns:
        inside = in_range(df, base_ns, dropped, WHAT[table])
        if inside is not None:
            df = df.filter(inside)
    times = [(pl.col(c) + base_ns).alias(c) for c in ("start_ns", "end_ns")] if base_ns else []
    df = df.with_columns(*times, shared_strings(df["name"]).alias("name"))
    if table == "ops":
        return nested(df, ["pid", "tid"], "op_id")
    if table == "regions":
        df, deep = cap_region_depth(nested(df, ["kind", "pid", "tid"], "region_id"))
        if deep:
            dropped[f"{WHAT[table]}: {DEEP_REASON}"] += deep
    return df


def in_range(df: pl.DataFrame, base_ns: int, dropped: Counter[str], what: str) -> pl.Series | None:
    """Which events stay within ±TIME_LIMIT_NS once the time base is added (the bounds are
    computed in Python integers, so nothing wraps); None when all do. The others are counted."""
    lo, hi = -TIME_LIMIT_NS - base_ns, TIME_LIMIT_NS - base_ns  # |base_ns| < TIME_LIMIT_NS
    out = df.select(((pl.col("start_ns") <= lo) | (pl.col("end_ns") >= hi)).alias("out"))["out"]
    n = int(out.sum())
    if not n:
        return None
    dropped[f"{what}: time beyond ±2^62 ns after adding baseTimeNanoseconds"] += n
    return ~out


def _dedupe(df: pl.DataFrame, key: list[str], dropped: Counter[str], what: str) -> pl.DataFrame:
    """Drop repeated events (all of ``key`` equal). The per-row hash finds candidates cheaply;
    the full key decides, so a hash collision never drops an event."""
    # Sorted hashes, not a hash table: 8 bytes a row instead of ~60 (a big table's hash table
    # stayed in RSS after use).
    keys = df["_key"].sort()
    repeated = keys.filter(keys == keys.shift(1))
    del keys
    if repeated.is_empty():
        return df
    cand = df["_key"].is_in(repeated.unique().implode())
    dup = df.select((~pl.struct(key).is_first_distinct() & cand).alias("d"))["d"]
    n = int(dup.sum())
    if n:
        dropped[f"{what}: duplicate event"] += n
        df = df.filter(~dup)
    return df


def shared_strings(cat: pl.Series) -> pl.Series:
    """Categorical → String whose rows share one copy of each distinct value (a plain cast
    would copy every row's bytes: ~200 bytes per kernel name)."""
    uniq = cat.unique().drop_nulls()
    mapping = pl.DataFrame({"c": uniq.to_physical(), "s": uniq.cast(pl.String())})
    return cat.to_physical().replace_strict(mapping["c"], mapping["s"], default=None, return_dtype=pl.String())


NEST_CHUNK_ROWS = 100_000


def native_nested(df: pl.DataFrame, group: list[str]) -> tuple[pl.Series, pl.Series]:
    """``depth`` and the parent's row number of each row of ``df`` (a row of ``start_ns``,
    ``end_ns`` and the ``group`` columns), from the native nesting (needs the extension)."""
    # Group columns as int64 keys: integers as they are, others (and nulls) by dense rank.
    keys = [
        df[c] if df.schema[c].is_integer() and not df[c].has_nulls() else df[c].rank("dense").fill_null(0)
        for c in group
    ]
    return kineto_native.nest(keys, df["start_ns"], df["end_ns"], SIBLING_OVERLAP_NS)


def nested(df: pl.DataFrame, group: list[str], id_col: str) -> pl.DataFrame:
    """Row ids, then depth/parent from :func:`nest`, run on slim chunks to bound memory; overlaps
    under :data:`~tracekit.tables.intervals.SIBLING_OVERLAP_NS` make siblings (Kineto's µs clock rounds).

    Chunks are cut only where nothing is open on a (group) thread — a start at or after the
    latest end so far — so no interval can nest across a cut and the result equals one call.
    """
    df = df.with_row_index(id_col).with_columns(pl.col(id_col).cast(pl.Int64()))
    if df.is_empty():  # every event of the table was dropped
        return df.with_columns(pl.lit(None, pl.Int64()).alias("depth"), pl.lit(None, pl.Int64()).alias("parent_id"))
    if kineto_native.available():  # in C: an index sort, one pass, results in row order
        return df.with_columns(*native_nested(df, group))  # row number = id_col (with_row_index above)
    # Sorted by thread, then start (end descending, ties by id); a thread's number is a running
    # count of where the group columns change (no join: less memory on million-row tables).
    slim = df.select([*group, id_col, "start_ns", "end_ns"]).sort(
        [*group, "start_ns", "end_ns", id_col],
        descending=[*([False] * len(group)), False, True, False],
        nulls_last=True,
    )
    new_group = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in group])
    slim = slim.select(new_group.cum_sum().alias("_g"), id_col, "start_ns", "end_ns")
    prev_end = pl.col("end_ns").cum_max().shift(1).over("_g")
    free = prev_end.is_null() | (pl.col("start_ns") >= prev_end)
    row = pl.int_range(pl.len(), dtype=pl.Int64())
    chunk = slim.select(pl.when(free).then(row // NEST_CHUNK_ROWS).forward_fill().alias("c"))["c"]
    # Chunk ids never decrease in this order: nest zero-copy slices one after the other.
    parts, offset = [], 0
    for length in chunk.rle().struct.field("len").to_list():
        part = nest(slim.slice(offset, length), ["_g"], id_col, sibling_ns=SIBLING_OVERLAP_NS)
        parts.append(part.select(id_col, "depth", "parent_id"))
        offset += length
    del slim, chunk
    out = pl.concat(parts).sort(id_col)
    return df.with_columns(out["depth"], out["parent_id"])


# --- in parts: a spilled table, never held whole (the streamed ingest) ---------------------------
# Each built batch of a table was spilled to an Arrow IPC file (``Collector``). What needs the
# whole table (duplicates, row ids, the nesting of ops and regions) is worked out on a slim read of
# it: the duplicate-key hash, the times and the nesting keys, 32-48 bytes a row, not the ~270 of a
# finished op (the native nesting then needs about as much again). The files are then read back
# one at a time, rows kept or dropped, the time base added, the slim pass's ids, depths and parents
# attached, and handed on in parts of about PART_ROWS rows: one after another they equal
# finish_table of the whole table (tested). Batches out of file order (events the native scanner
# left to Python are built apart from their window) need a sort of the whole table: the caller
# finishes such a table whole.

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
