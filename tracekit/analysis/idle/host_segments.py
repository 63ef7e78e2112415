"""Innermost-op stretches of host threads: which op each thread is in, moment by moment (the
ops' self time). The idle causes (tracekit/analysis/idle/causes.py) cut idle pieces by them into
``cpu_op`` time, named by the innermost op, and ``outside_ops`` time."""

from __future__ import annotations

import polars as pl
from tracekit.analysis.regions.metrics import positions


def op_segments(ops: pl.DataFrame | None, threads: pl.DataFrame, names: bool = True) -> pl.DataFrame:
    """Innermost-op stretches of the ops on ``threads`` (pid, tid): ``pid, tid, s, e, op`` (the
    ops' self time, as ``tracekit.tables.intervals.self_time_segments`` defines it).

    One sort of the start and end events per thread (ends before starts at equal times, deeper
    ends first, shallower starts first): after a start the innermost op is the one that started,
    after an end its parent; each event's stretch runs to the next event. Needs proper nesting
    (``parent_id`` = the innermost enclosing op on the thread, as the loaders give). An event is
    two int64 values, its packed sort key and the op it opens; thread and time are decoded from
    the key, names gathered only for the stretches (events with their own thread, time and order
    columns held much more memory on a big trace)."""
    schema = {"pid": pl.Int64(), "tid": pl.Int64(), "s": pl.Int64(), "e": pl.Int64(), "op": pl.String()}
    if not names:  # ``op`` = the op's op_id (8 bytes a stretch, not a 16-byte name view); see op_labels
        schema["op"] = pl.Int64()
    if ops is None or ops.height == 0 or threads.height == 0:
        return pl.DataFrame(schema=schema)
    o = ops.select("op_id", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id")
    thr = threads.unique()
    if o.select("pid", "tid").unique().join(thr, on=["pid", "tid"], how="anti").height:  # else no copy
        o = o.join(thr, on=["pid", "tid"], how="semi")
    if o.height == 0:
        return pl.DataFrame(schema=schema)
    # one int64 sort key: ((thread × extent + t − t0) × 2 + kind) × (2·D + 1) + order + D
    # (kind: 0 end, 1 start; order: −depth for an end, depth for a start; thread: dense rank from 1)
    t0, t1, dmax = o.select(
        pl.col("start_ns").min().alias("a"),
        pl.col("end_ns").max().alias("b"),
        pl.col("depth").max().cast(pl.Int64()).alias("c"),
    ).row(0)
    o = o.with_columns(pl.struct("pid", "tid").rank("dense").cast(pl.Int64()).alias("_g"))
    span, dm = int(t1) - int(t0) + 1, int(dmax or 0)
    dd = 2 * dm + 1
    if (int(o["_g"].max() or 0) + 1) * span * 2 * dd >= 2**62:  # type: ignore[arg-type]  # pragma: no cover
        return _op_segments_sorted(o, ops, schema, names)
    x = (pl.col("_g") * span - int(t0)) * 2
    d = pl.col("depth").cast(pl.Int64())
    ev = pl.concat(
        [
            o.select(((x + pl.col("start_ns") * 2 + 1) * dd + d + dm).alias("_key"), pl.col("op_id").alias("_lab")),
            o.select(((x + pl.col("end_ns") * 2) * dd - d + dm).alias("_key"), pl.col("parent_id").alias("_lab")),
        ]
    )
    ev = ev[ev["_key"].arg_sort()]
    xt = pl.col("_key") // dd // 2  # thread × extent + t − t0
    seg = ev.select((xt // span).alias("_g"), (xt % span + int(t0)).alias("s"), "_lab")
    del ev
    nxt = pl.when(pl.col("_g") == pl.col("_g").shift(-1)).then(pl.col("s").shift(-1))
    seg = seg.with_columns(nxt.alias("e")).filter(pl.col("_lab").is_not_null() & (pl.col("e") > pl.col("s")))
    thr = o.select("pid", "tid", "_g").unique("_g").sort("_g")  # rank r is row r − 1
    at = seg["_g"] - 1
    return pl.DataFrame(
        [
            thr["pid"].gather(at),
            thr["tid"].gather(at),
            seg["s"],
            seg["e"],
            _op_names(ops, seg["_lab"]) if names else seg["_lab"].alias("op"),
        ]
    ).cast(schema)  # type: ignore[arg-type]


def _op_names(ops: pl.DataFrame, op_ids: pl.Series) -> pl.Series:

    return ops["name"].gather(positions(op_ids, ops["op_id"])).alias("op")


def op_labels(df: pl.DataFrame, ops: pl.DataFrame | None) -> pl.DataFrame:
    """``df`` with its ``op`` column of op ids (``op_segments(..., names=False)``) as op names."""
    if df.schema["op"] == pl.String():
        return df
    if ops is None or df.height == 0:
        return df.with_columns(pl.lit(None, dtype=pl.String()).alias("op"))
    return df.with_columns(_op_names(ops, df["op"]))


def _op_segments_sorted(
    o: pl.DataFrame, ops: pl.DataFrame, schema: dict[str, pl.DataType], names: bool
) -> pl.DataFrame:  # pragma: no cover - needs ~10^8 s of trace
    """:func:`op_segments` by a multi-column sort, when the packed key could overflow."""
    d = pl.col("depth").cast(pl.Int64())
    ev = pl.concat(
        [
            o.select(
                "pid",
                "tid",
                pl.col("start_ns").alias("t"),
                pl.lit(1).alias("_k"),
                d.alias("_o"),
                pl.col("op_id").alias("_lab"),
            ),
            o.select(
                "pid",
                "tid",
                pl.col("end_ns").alias("t"),
                pl.lit(0).alias("_k"),
                (-d).alias("_o"),
                pl.col("parent_id").alias("_lab"),
            ),
        ]
    ).sort("pid", "tid", "t", "_k", "_o")
    same = (pl.col("pid") == pl.col("pid").shift(-1)) & (pl.col("tid") == pl.col("tid").shift(-1))
    seg = ev.select("pid", "tid", pl.col("t").alias("s"), pl.when(same).then(pl.col("t").shift(-1)).alias("e"), "_lab")
    seg = seg.filter(pl.col("_lab").is_not_null() & (pl.col("e") > pl.col("s")))
    op = _op_names(ops, seg["_lab"]) if names else seg["_lab"].alias("op")
    return seg.with_columns(op).drop("_lab").cast(schema)  # type: ignore[arg-type]
