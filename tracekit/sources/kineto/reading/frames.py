"""One batch of one table's events → its frame: columns from the decoded msgspec events, or the
same columns from the native scanner's output; then per batch the validity checks (bad events
dropped and counted by reason), the derived columns, names as Categorical and the duplicate-key
hash. Times stay as text until ``ns_from_raw`` converts them exactly.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import Any

import polars as pl

from tracekit.sources.kineto.reading import columns as kc
from tracekit.sources.kineto.reading.finish import DEDUPE_KEYS, TIME_LIMIT_NS, WHAT
from tracekit.sources.kineto.routes import KERNEL_CATS, LAUNCH_CATS, REGION_CATS, TABLE_SPECS
from tracekit.tables import schema


def attr_list(objs: list[Any], attr: str) -> list[Any]:
    """``[o.attr for o in objs]`` without a Python-level loop."""
    return list(map(attrgetter(attr), objs))


def _common(evs: list[Any], notes: Counter[str], what: str) -> dict[str, pl.Series]:
    return {
        "name": kc.strings(attr_list(evs, "name"), f"{what} name", notes),
        "pid": kc.ints(attr_list(evs, "pid"), f"{what} pid", notes),
        "tid": kc.ints(attr_list(evs, "tid"), f"{what} tid", notes),
        "_ts_ns": kc.ns_from_raw(attr_list(evs, "ts")),
        "_dur_ns": kc.ns_from_raw(attr_list(evs, "dur")),
    }


def built_frame(table: str, evs: list[Any], cats: pl.Series, notes: Counter[str]) -> pl.DataFrame:
    """A table's frame from decoded msgspec events (columns of ``TABLE_SPECS``)."""
    what = WHAT[table]
    cols = _common(evs, notes, what)
    args = attr_list(evs, "args")
    for col, kind, attr in TABLE_SPECS[table]:
        if kind == "cat":
            cols[col] = cats
        elif kind == "int":
            cols[col] = kc.ints(attr_list(args, attr), f"{what} {col.lstrip('_')}", notes)
        elif kind == "raw":
            cols[col] = kc.raw_text(attr_list(args, attr))
        else:
            cols[col] = kc.str_lists(attr_list(args, attr))
    return pl.DataFrame(cols)


def native_frame(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """The same frame from the native scanner's columns (``NATIVE_COLUMNS``), ``_ev`` last."""
    cols = {"name": df["name"], "pid": df["pid"], "tid": df["tid"], "_ts_ns": df["ts_ns"], "_dur_ns": df["dur_ns"]}
    for col, kind, _ in TABLE_SPECS[table]:
        field = df[col.lstrip("_")]
        cols[col] = kc.str_lists_text(field) if kind == "strlist" else field
    cols["_ev"] = df["_ev"]
    return pl.DataFrame(cols)


def _valid(df: pl.DataFrame, dropped: Counter[str], what: str) -> pl.LazyFrame:
    """Drop (and count) events without a usable ts/dur, with dur < 0, or with a ts or dur of
    ±2^62 ns or more (``TIME_LIMIT_NS``: then ``ts + dur`` and every later sum of a few times
    fit int64, never wrap); times relative to the time base (added in ``finish_table``, as
    ``baseTimeNanoseconds`` may follow ``traceEvents``)."""
    ts, dur = pl.col("_ts_ns"), pl.col("_dur_ns")
    bad_ts = ts.is_null()
    bad_dur = dur.is_null() & ~bad_ts
    neg = (dur < 0) & ~bad_ts
    far = ((ts >= TIME_LIMIT_NS) | (ts <= -TIME_LIMIT_NS) | (dur >= TIME_LIMIT_NS)).fill_null(False)  # no abs(): -2^63
    counts = df.select(
        bad_ts.sum().alias("ts"), bad_dur.sum().alias("dur"), neg.sum().alias("neg"), far.sum().alias("far")
    ).row(0)
    reasons = (
        "ts missing, non-numeric or beyond ±2^63 ns",
        "dur missing, non-numeric or beyond ±2^63 ns",
        "negative duration",
        "ts or dur beyond ±2^62 ns",
    )
    for reason, n in zip(reasons, counts):
        if n:
            dropped[f"{what}: {reason}"] += int(n)
    lf = df.lazy()
    if any(counts):
        lf = lf.filter(~bad_ts & ~bad_dur & (dur >= 0) & ~far)
    return lf.with_columns(ts.alias("start_ns"), (ts + dur).alias("end_ns")).drop("_ts_ns", "_dur_ns")


def prepare(df: pl.DataFrame, table: str, dropped: Counter[str]) -> pl.DataFrame:
    """Per batch: validity, derived columns, a hash of the duplicate key, and names as
    Categorical (repeated names are then stored once; see ``finish.shared_strings``). One query after
    the validity counts."""
    lf = _valid(df, dropped, WHAT[table])
    if table == "kernels":
        lf = (
            lf.with_columns(
                pl.col("_cat").replace_strict(KERNEL_CATS, return_dtype=pl.String()).alias("kind"),
                # device/stream args are authoritative; pid/tid are their display copies.
                pl.coalesce("device", "pid").alias("device"),
                pl.coalesce("stream", "tid").alias("stream"),
                kc.dims(pl.col("_grid")).alias("_grid"),
                kc.dims(pl.col("_block")).alias("_block"),
            )
            .with_columns(
                *[
                    pl.col(f"_{d}").list.get(i, null_on_oob=True).alias(f"{d}_{ax}")
                    for d in ("grid", "block")
                    for i, ax in enumerate("xyz")
                ],
                pl.when(pl.col("kind") == schema.KIND_MEMCPY)
                .then(pl.col("name").str.extract(r"Memcpy (\w+)"))
                .alias("copy_kind"),
            )
            .with_columns(comm_bytes(pl.col("_comm_nelems"), pl.col("_comm_dtype")).alias("comm_bytes"))
            .drop("_cat", "_grid", "_block", "_comm_nelems", "_comm_dtype")
        )
    elif table == "launches":
        lf = lf.with_columns(pl.col("_cat").replace_strict(LAUNCH_CATS, return_dtype=pl.String()).alias("api")).drop(
            "_cat"
        )
    elif table == "ops":
        lf = lf.with_columns(
            kc.own_text(kc.json_text_or_null(pl.col("input_dims"))).alias("input_dims"),
            kc.own_text(kc.json_text_or_null(pl.col("input_strides"))).alias("input_strides"),
        )
    else:
        kind = pl.col("_cat").replace_strict(REGION_CATS, return_dtype=pl.String())
        gpu = kind == schema.REGION_GPU_USER
        # gpu_user_annotation: pid/tid are device/stream (some traces lack the stream arg).
        lf = lf.with_columns(
            kind.alias("kind"),
            pl.when(gpu).then(pl.coalesce("_device", "pid")).otherwise(pl.col("pid")).alias("pid"),
            pl.when(gpu).then(pl.coalesce("_stream", "tid")).otherwise(pl.col("tid")).alias("tid"),
        ).drop("_cat", "_device", "_stream")
    # Hash after the Categorical cast: codes are global in the process, cheaper than the text.
    lf = lf.with_columns(pl.col("name").cast(pl.Categorical()))
    key = pl.struct(DEDUPE_KEYS[table]).hash(seed=7).alias("_key")
    return lf.with_columns(key).collect(engine="in-memory")  # the engine the eager steps ran on


# c10::ScalarType names as Kineto writes a collective's ``dtype`` arg → bytes per element
COMM_DTYPE_BYTES: dict[str, int] = {
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "Short": 2,
    "Int": 4,
    "Long": 8,
    "Half": 2,
    "BFloat16": 2,
    "Float": 4,
    "Double": 8,
    "ComplexHalf": 4,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "Float8_e5m2": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2fnuz": 1,
    "Float8_e4m3fnuz": 1,
}


def comm_bytes(nelems: pl.Expr, dtype_json: pl.Expr) -> pl.Expr:
    """A collective kernel's input message in bytes: its ``In msg nelems`` arg × the size of its
    ``dtype`` arg (JSON text of a c10 scalar type name); null when either is absent, the type is
    not one of :data:`COMM_DTYPE_BYTES`, or the product is negative or beyond int64."""
    size = dtype_json.str.strip_chars('"').replace_strict(COMM_DTYPE_BYTES, default=None, return_dtype=pl.Int64())
    n = nelems.cast(pl.Int64(), strict=False)
    ok = (n >= 0) & (n <= (2**62) // 16)
    return pl.when(ok).then(n * size).otherwise(None).cast(pl.Int64())
