"""NVTX ranges in the export's own order (start time), numbered and nested block by block.

``regions.region_id`` is a range's position in (globalTid, start, end desc) order. SQLite can
sort the ranges that way (``ORDER BY``: slow on a big export, spilled to temporary files), but
nsys writes ``NVTX_EVENTS`` in start order (every shared export and the synthetic ones), so this
module reads the rows as they are stored and gives each range the same id and nesting as the
sorted read would:

* the ranges of each globalTid are counted first (``nvtx.thread_counts``; :func:`thread_offsets`),
  so a range's id is the count of ranges of lower globalTids plus its rank within its own thread;
* the rows arrive in blocks of consecutive start times (rows sharing the last start of a chunk
  wait for the next one, so ties are never split); within a block the ranges of a thread are
  ranked by (start, end desc), ties in storage order, which is how SQLite's stable sort orders
  them;
* :class:`Nesting` gives each range the depth and parent that
  :func:`tracekit.tables.intervals.nest` gives it among all the ranges of its thread, carrying
  from block to block only what later ranges can see: the ranges still open, and the latest range
  at each depth.

A block that starts before the end of the previous one raises :class:`NotInTimeOrder`; the
reader then starts again with the sorted read (``tracekit.sources.nsys.nvtx``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from tracekit.sources.nsys.sql import CHUNK_ROWS

# Rows of one start time held back at once at most (in chunks); more raises NotInTimeOrder and
# the sorted read, whose memory is bounded by its chunks, takes over.
MAX_TIE_CHUNKS = 4
_I64 = pl.Int64()


class NotInTimeOrder(Exception):
    """The ranges are not stored in start order (or cannot be numbered that way): read them sorted."""


def thread_offsets(per_thread: list[tuple[Any, Any]]) -> dict[int, int] | None:
    """globalTid → region_id of its first range (the number of ranges of lower globalTids), from
    (globalTid, ranges) rows of :func:`tracekit.sources.nsys.nvtx.thread_counts` (in globalTid
    order), or None when reading in storage order could not give the ids
    and nesting of the sorted read: a globalTid that is not an integer, or two globalTids with the
    same (pid, tid) (nesting is per pid and tid). A start, end or globalTid that is not an integer
    in a row stops the read itself (:func:`tracekit.sources.nsys.sql.iter_frames` with
    ``strict``: NotInTimeOrder)."""
    offsets: dict[int, int] = {}
    threads: set[tuple[int, int]] = set()
    at = 0
    for gtid, n in per_thread:
        if not isinstance(gtid, int) or gtid < 0:
            return None
        offsets[gtid] = at
        threads.add(((gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF))
        at += int(n)
    return offsets if len(threads) == len(offsets) else None


def in_start_blocks(frames: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """Regroup chunks in storage order into blocks of whole start times (the rows of a chunk's
    last start time wait for the next chunk); NotInTimeOrder when a start goes backwards."""
    held: pl.DataFrame | None = None
    last: int | None = None
    for df in frames:
        starts = df["start_ns"]
        if not starts.is_sorted() or (last is not None and int(starts[0]) < last):  # type: ignore[arg-type]
            raise NotInTimeOrder("NVTX ranges not stored in start order")
        last = int(starts[-1])  # type: ignore[arg-type]
        if held is not None:
            df = pl.concat([held, df], how="vertical_relaxed")
        tied = pl.col("start_ns") == last
        held = df.filter(tied)
        block = df.filter(~tied)
        if held.height > MAX_TIE_CHUNKS * CHUNK_ROWS:
            raise NotInTimeOrder("too many NVTX ranges start at the same time")
        if block.height:
            yield block
    if held is not None and held.height:
        yield held


def _tied(keys: list[str]) -> pl.Expr:
    """True on a row whose ``keys`` equal those of the row before."""
    return pl.all_horizontal([pl.col(k) == pl.col(k).shift(1) for k in keys]).fill_null(False)


def number(block: pl.DataFrame, next_id: dict[int, int], end_key: pl.Expr) -> pl.DataFrame:
    """``block`` (in start order) in region_id order, with ``region_id``: the thread's next free id
    plus the rank in (start, ``end_key`` desc) order, ties in block order. ``next_id``
    (globalTid → id) is advanced past the block."""
    ranked = block.sort("gtid", maintain_order=True)  # (gtid, start, block order)
    if bool(ranked.select(_tied(["gtid", "start_ns"]).any()).item()):
        ranked = (
            block.with_row_index("_row")
            .sort(["gtid", "start_ns", end_key, "_row"], descending=[False, False, True, False])
            .drop("_row")
        )
    counts = ranked.group_by("gtid", maintain_order=True).len()
    base = pl.DataFrame(
        {"gtid": counts["gtid"], "_base": [next_id[g] for g in counts["gtid"].to_list()]},
        schema={"gtid": _I64, "_base": _I64},
    )
    for g, n in counts.iter_rows():
        next_id[g] += n
    return (
        ranked.join(base, on="gtid", how="left", maintain_order="left")
        .with_columns((pl.col("_base") + pl.int_range(pl.len(), dtype=_I64).over("gtid")).alias("region_id"))
        .drop("_base")
    )


class Nesting:
    """``depth`` and ``parent_id`` of ranges that arrive in blocks of increasing start times,
    exactly as :func:`~tracekit.tables.intervals.nest` computes them over all ranges of a thread
    (order: start, end desc, region_id): depth = the number of earlier ranges of the thread still
    open at the range's start (end > start), parent = the latest earlier range one level up.

    Between blocks it keeps the ranges still open after the block's last start (only they can
    contain a later range) and the latest range at each depth (the parent candidates)."""

    def __init__(self) -> None:
        self.open = pl.DataFrame(schema={"gtid": _I64, "end_ns": _I64})
        self.latest = pl.DataFrame(schema={"gtid": _I64, "depth": pl.Int32(), "region_id": _I64})

    def add(self, block: pl.DataFrame) -> pl.DataFrame:
        """``block`` (gtid, region_id, start_ns, end_ns, ...; in region_id order) with depth and
        parent_id added."""
        work = block.select("gtid", "region_id", "start_ns", "end_ns")
        reordered = bool(
            work.select((_tied(["gtid", "start_ns"]) & (pl.col("end_ns") > pl.col("end_ns").shift(1))).any()).item()
        )
        if reordered:  # a never-ended range ties with a longer one: nest order differs from id order
            work = work.sort(["gtid", "start_ns", "end_ns", "region_id"], descending=[False, False, True, False])
        # depth = earlier ranges of the thread (carried open ones + those ahead in the block) minus
        # those closed by the range's start: every range (carried or in the block) with end <=
        # start, less the zero-length ones of the same start at or after it (they sort last).
        # Sorted by end only (one key: much cheaper than gtid, end); the as-of join below needs
        # the ends sorted within each thread, and counts them in that order.
        ends = pl.concat([self.open, work.select("gtid", "end_ns")]).sort("end_ns")
        ends = ends.with_columns(pl.int_range(1, pl.len() + 1, dtype=_I64).over("gtid").alias("_closed"))
        held = self.open.group_by("gtid").len().select("gtid", pl.col("len").cast(_I64).alias("_held"))
        zero = (pl.col("end_ns") == pl.col("start_ns")).cast(_I64)
        last_of_tie = ~_tied(["gtid", "start_ns"]).shift(-1).fill_null(False)
        work = (
            work.with_row_index("_pos")
            .with_columns(
                pl.col("_pos").cast(_I64),
                pl.int_range(pl.len(), dtype=_I64).over("gtid").alias("_p"),
                zero.cum_sum().alias("_zc"),
                zero.alias("_z"),
            )
            .with_columns(
                (pl.when(last_of_tie).then(pl.col("_zc")).backward_fill() - pl.col("_zc") + pl.col("_z")).alias("_zl")
            )
            .join_asof(
                ends, left_on="start_ns", right_on="end_ns", by="gtid", strategy="backward", check_sortedness=False
            )
            .join(held, on="gtid", how="left", maintain_order="left")
            .with_columns(
                (pl.col("_held").fill_null(0) + pl.col("_p") - pl.col("_closed").fill_null(0) + pl.col("_zl"))
                .cast(pl.Int32())
                .alias("depth")
            )
            .drop("_p", "_zc", "_z", "_zl", "_closed", "_held", "end_ns_right", strict=False)
        )
        # Parent: the latest earlier range of the thread one level up (those of earlier blocks
        # come first: position -1).
        candidates = pl.concat(
            [
                self.latest.with_columns(pl.lit(-1, dtype=_I64).alias("_pos")),
                work.select("gtid", "depth", "region_id", "_pos"),
            ]
        ).select("gtid", (pl.col("depth") + 1).alias("_child"), pl.col("region_id").alias("parent_id"), "_pos")
        work = work.with_columns(pl.col("depth").alias("_child")).join_asof(
            candidates,
            on="_pos",
            by=["gtid", "_child"],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        work = work.with_columns(pl.when(pl.col("depth") > 0).then(pl.col("parent_id")).alias("parent_id"))
        last_start = work["start_ns"].max()
        self.open = pl.concat([self.open, work.select("gtid", "end_ns")]).filter(pl.col("end_ns") > last_start)
        self.latest = (
            pl.concat([self.latest, work.select("gtid", "depth", "region_id")])
            .group_by(["gtid", "depth"], maintain_order=True)
            .last()
        )
        if reordered:
            work = work.sort("region_id")
        return block.with_columns(work["depth"], work["parent_id"])
