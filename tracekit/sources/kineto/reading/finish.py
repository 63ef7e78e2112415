"""Finishing a Kineto table once all its batches are in: duplicates dropped (counted), the time
base added, names shared, ops/regions nested (natively when the extension is built)."""

from __future__ import annotations

from collections import Counter

import polars as pl

from tracekit.tables.depth_cap import DEEP_REASON, cap_region_depth
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
