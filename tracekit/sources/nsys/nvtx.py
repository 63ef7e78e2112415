"""nsys ``NVTX_EVENTS`` → canonical ``regions`` (kind ``nvtx``) and, where range texts carry
shapes, ``ops``.

Shapes are recognised in two text layouts:

* PyProf-style dictionaries, ``{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '',
  'type': 'tensor', 'shape': (32, 64), 'dtype': 'float32'}, ...]}`` (parsed with ``ast.literal_eval``,
  never ``eval``);
* ``torch.autograd.profiler.emit_nvtx(record_shapes=True)`` texts, ``aten::addmm, seq = 12,
  op_id = 40, sizes = [[32], [32, 64], [64, 16]]``.
"""

from __future__ import annotations

import ast
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Any

import polars as pl

from tracekit import numbers
from tracekit.tables.depth_cap import DEEP_REASON, cap_region_depth
from tracekit.tables import schema
from tracekit.tables.dictstr import coalesce_shared
from tracekit.tables.intervals import nest
from tracekit.sources.nsys.nvtx_time import Nesting, NotInTimeOrder, in_start_blocks, number, thread_offsets
from tracekit.sources.nsys.sql import TIME_LIMIT_NS, columns, count, iter_frames, pid_of, read_frame, tid_of

NVTX_TABLE = "NVTX_EVENTS"
# ENUM_NSYS_EVENT_TYPE ids (identical in 2.x and 3.x exports).
PUSH_POP, START_END = 59, 60
NON_RANGE_TYPES = {
    33: "NVTX category name",
    34: "NVTX mark (an instant, not a range)",
    39: "NVTX thread name",
    75: "NVTX domain creation (its text names the domain)",
}
DOMAIN_CREATE = 75
# Chunks of ranges fetched ahead of the reader in start order: while the per-thread counts that
# number them are still being made (:func:`thread_counts`), the fetch goes on into these.
AHEAD_CHUNKS = 3

# PyProf dtype names → the type strings Kineto writes in ``Input type``.
PYPROF_DTYPES = {
    "float32": "float",
    "float": "float",
    "float16": "c10::Half",
    "half": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "float64": "double",
    "double": "double",
    "int64": "long int",
    "long": "long int",
    "int32": "int",
    "int": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
}

_I64 = pl.Int64()


OPTIONAL = ("textId", "endGlobalTid", "domains")  # what prepass finds in use; read_regions skips the rest


def prepass(conn: sqlite3.Connection, have: set[str]) -> tuple[Counter[str], set[str], int]:
    """What :func:`read_regions` needs before it starts, counted by SQLite (run in a thread on a
    connection of its own: :class:`~tracekit.sources.nsys.background.Background`): the NVTX
    events that are not ranges (as drop counts), which of :data:`OPTIONAL` are in use
    (``textId`` / ``endGlobalTid`` set on some range, ``domains``: some domain-creation event;
    :func:`read_regions` does not read the others, all null), and the number of ranges.

    Two queries: the ranges and their optional columns counted in one scan; the events that are
    not ranges (all rows less the ranges; the row count is kept by SQLite's b-tree) grouped by
    type only when there are some. The usable ranges of each thread are counted apart
    (:func:`thread_counts`, which reads every range's globalTid)."""
    skipped: Counter[str] = Counter()
    if NVTX_TABLE not in have:
        return skipped, set(), 0
    cols = columns(conn, NVTX_TABLE)
    ranges = f"eventType IN ({PUSH_POP}, {START_END})"
    optional = [f'count("{c}")' if c in cols else "0" for c in OPTIONAL[:2]]
    n_ranges, *found = conn.execute(
        f"SELECT count(*), {', '.join(optional)} FROM {NVTX_TABLE} WHERE {ranges}"
    ).fetchone()
    used = {name for name, k in zip(OPTIONAL[:2], found, strict=True) if k}
    if count(conn, NVTX_TABLE) > n_ranges:
        for etype, k in conn.execute(
            f"SELECT eventType, count(*) FROM {NVTX_TABLE} WHERE eventType IS NULL OR NOT ({ranges}) GROUP BY 1"
        ).fetchall():
            skipped[NON_RANGE_TYPES.get(etype, f"NVTX event of type {etype}")] += int(k)
            if etype == DOMAIN_CREATE:
                used.add("domains")
    return skipped, used, int(n_ranges)


def thread_counts(conn: sqlite3.Connection, have: set[str]) -> list[tuple[Any, Any]]:
    """(globalTid, usable ranges) per globalTid, in globalTid order, a globalTid that is not an
    integer as None (first, as SQLite's GROUP BY orders NULL); run in a thread of its own while the
    first ranges are fetched. The column is read through the driver and counted by polars chunk by
    chunk (SQLite's GROUP BY sorted every range first: 4.0 s, now 1.4 s at 6.9 M ranges, BENCHMARKS.md)."""
    if NVTX_TABLE not in have:
        return []
    sql = f"SELECT globalTid FROM {NVTX_TABLE} WHERE {_ranges()}"
    counts = [f.group_by("globalTid").len() for f in iter_frames(conn, sql, {"globalTid": _I64})]
    if not counts:
        return []
    total = pl.concat(counts).group_by("globalTid").agg(pl.col("len").sum()).sort("globalTid", nulls_last=False)
    return [(g, int(n)) for g, n in total.iter_rows()]


def numbering(per_thread: list[tuple[Any, Any]], n_ranges: int, dropped: Counter[str]) -> dict[int, int] | None:
    """Count the ranges without a usable time in ``dropped`` (the ranges less the usable ones of
    every thread: a range is usable or not, never NULL, :func:`_usable`) and return the region_id
    offsets of a read in start order (:func:`~tracekit.sources.nsys.nvtx_time.thread_offsets`;
    None: read sorted)."""
    bad = n_ranges - sum(int(n) for _, n in per_thread)
    if bad:
        dropped["NVTX range without a start, ending before it starts, or beyond ±2^62 ns"] += bad
    return thread_offsets(per_thread)


def _ranges() -> str:
    """The NVTX events read as ranges: push/pop and start/end ranges with usable times."""
    return f"eventType IN ({PUSH_POP}, {START_END}) AND {_usable()}"


def _usable() -> str:
    """A usable range: an integer start and (when closed) end >= start, both within ±2^62 ns
    (text sorts above every number in SQLite, so a text time fails `< limit`)."""
    lim = TIME_LIMIT_NS
    return (
        f'"start" IS NOT NULL AND "start" > {-lim} AND "start" < {lim} '
        f'AND ("end" IS NULL OR ("end" >= "start" AND "end" < {lim}))'
    )


def read_regions(
    conn: sqlite3.Connection,
    have: set[str],
    strings: pl.DataFrame,
    capture_end_ns: int,
    warnings: list[str],
    offsets: Callable[[], dict[int, int] | None] | None = None,
    used: Collection[str] = OPTIONAL,
) -> Iterator[pl.DataFrame]:
    """Push/pop and start/end NVTX ranges on their CPU thread, nested per (pid, tid), in chunks.

    With ``offsets`` (called once, at the first block: globalTid → region_id of its first range,
    :func:`numbering`; the ranges fetched meanwhile wait, up to :data:`AHEAD_CHUNKS` chunks) the
    ranges are read as stored (start order) and numbered and nested block by block
    (:mod:`tracekit.sources.nsys.nvtx_time`); a chunk out of start order, or offsets that are
    None, raise :class:`~tracekit.sources.nsys.nvtx_time.NotInTimeOrder` (the caller reads again
    without ``offsets``). Without them SQLite sorts
    them by (globalTid, start, end desc); each chunk is nested together with the ranges still
    open from the previous chunk. Either way memory stays bounded and region_id, depth and
    parent are the same as nesting everything at once. Of :data:`OPTIONAL`, only what ``used``
    names is read (:func:`prepass`): without ``domains`` every domain is null and
    ``domainId`` is not read; without ``textId`` / ``endGlobalTid`` those columns are all null
    on ranges and are not read either.
    """
    if NVTX_TABLE not in have:
        return
    cols = columns(conn, NVTX_TABLE)
    domains = _domains(conn, cols) if "domains" in used else pl.DataFrame()
    sql, sch = _range_query(cols, used, domains.height > 0)
    if offsets is None:
        sql += f' ORDER BY globalTid, "start", coalesce("end", {int(capture_end_ns)}) DESC'
    frames = _frames(conn, sql, sch, strict=offsets is not None)
    ranges = (_named_range(df, strings, domains, capture_end_ns) for df in frames)
    if offsets is None:
        chunks = _sorted_chunks(ranges)
    else:
        # The sorted read's tie order: a never-ended range sorts as if it ended at the capture end.
        end_key = pl.when(pl.col("unterminated")).then(pl.lit(capture_end_ns)).otherwise(pl.col("end_ns"))
        chunks = _time_order_chunks(ranges, offsets, end_key)
    n_open = n_cross = n_deep = 0
    for df in chunks:
        df, deep = cap_region_depth(df)
        n_deep += deep
        n_open += int(df["unterminated"].sum())
        n_cross += int(df["end_tid"].is_not_null().sum())
        yield df
    if n_deep:
        warnings.append(f"{numbers.count(n_deep, 'NVTX range')} {DEEP_REASON} dropped")
    if n_open:
        warnings.append(
            f"{numbers.count(n_open, 'NVTX range')} never ended; extended to the end of the capture (unterminated=True)"
        )
    if n_cross:
        warnings.append(
            f"{numbers.count(n_cross, 'NVTX range')} ending on another thread than they start (end_tid set); "
            "kept on the starting thread"
        )


def _range_query(cols: Collection[str], used: Collection[str], domains: bool) -> tuple[str, dict[str, pl.DataType]]:
    """The ranges' SELECT (without its order) and the frame schema: of :data:`OPTIONAL`, only the
    columns ``used`` names (the domain id only when ``domains`` are read)."""
    text = '"text"' if "text" in cols else "NULL"
    sel = ['"start"', '"end"', "globalTid", text]
    sch: dict[str, pl.DataType] = {"start_ns": _I64, "end_ns": _I64, "gtid": _I64, "text": pl.String()}
    for column, name, wanted in (
        ("endGlobalTid", "end_gtid", "endGlobalTid" in used),
        ("textId", "text_id", "textId" in used),
        ("domainId", "domain_id", domains),
    ):
        if wanted:
            sel.append(f'"{column}"' if column in cols else "NULL")
            sch[name] = _I64
    return f"SELECT {', '.join(sel)} FROM {NVTX_TABLE} WHERE {_ranges()}", sch


def _named_range(df: pl.DataFrame, strings: pl.DataFrame, domains: pl.DataFrame, capture_end_ns: int) -> pl.DataFrame:
    """A chunk of ranges as region rows: the name (inline text, else the registered string), pid and
    tid, never-ended ranges extended to the capture's end, the thread a range ends on when it is
    another, and the domain's name."""
    if "text_id" not in df.columns or df["text_id"].null_count() == df.height:  # nothing to join
        df = df.with_columns(pl.lit(None, dtype=pl.String()).alias("_registered"))
    else:
        lookup = strings.rename({"id": "text_id", "value": "_registered"})
        df = df.join(lookup, on="text_id", how="left", maintain_order="left")
    df = coalesce_shared(df, "text", "_registered", "name")  # the registered string shared, not copied
    df = df.with_columns(
        pid_of(pl.col("gtid")).alias("pid"),
        tid_of(pl.col("gtid")).alias("tid"),
        pl.col("end_ns").is_null().alias("unterminated"),
        pl.coalesce("end_ns", pl.max_horizontal(pl.col("start_ns"), pl.lit(capture_end_ns))).alias("end_ns"),
        (
            pl.when(pl.col("end_gtid").is_not_null() & (pl.col("end_gtid") != pl.col("gtid"))).then(
                tid_of(pl.col("end_gtid"))
            )
            if "end_gtid" in df.columns
            else pl.lit(None, dtype=_I64)
        ).alias("end_tid"),
        pl.lit(schema.REGION_NVTX).alias("kind"),
    ).drop("text", "_registered", "text_id", strict=False)
    if domains.height:
        df = df.join(domains, on=["pid", "domain_id"], how="left", maintain_order="left")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String()).alias("domain"))
    return df.drop("end_gtid", "domain_id", strict=False)


def _frames(conn: sqlite3.Connection, sql: str, sch: dict[str, pl.DataType], strict: bool) -> Iterator[pl.DataFrame]:
    """:func:`iter_frames`; with ``strict`` a cell of another type (a float time, a text
    globalTid: SQLite orders those otherwise than their null or truncated value) raises
    NotInTimeOrder, and the sorted read, which keeps them as before, takes over."""
    try:
        yield from iter_frames(conn, sql, sch, strict=strict, ahead_chunks=AHEAD_CHUNKS if strict else 1)
    except TypeError as exc:
        raise NotInTimeOrder(str(exc)) from None


def _time_order_chunks(
    frames: Iterator[pl.DataFrame], offsets: Callable[[], dict[int, int] | None], end_key: pl.Expr
) -> Iterator[pl.DataFrame]:
    """Ranges read in storage (start) order → numbered and nested chunks, in region_id order."""
    nesting = Nesting()
    next_id: dict[int, int] | None = None
    for block in in_start_blocks(frames):
        if next_id is None:
            first = offsets()
            if first is None:
                raise NotInTimeOrder("the ranges' threads cannot be numbered in storage order")
            next_id = dict(first)
        block = number(block, next_id, end_key)
        yield nesting.add(block).drop("gtid").sort("region_id")


def _sorted_chunks(frames: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """Ranges sorted by (globalTid, start, end desc) → numbered and nested chunks: each chunk is
    nested with the ranges of its first thread still open at the end of the previous chunk."""
    carry = pl.DataFrame()
    next_id = 0
    for df in frames:
        df = (
            df.drop("gtid").with_row_index("region_id", offset=next_id).with_columns(pl.col("region_id").cast(pl.Int64))
        )
        next_id += df.height
        work = (
            pl.concat([carry, df.with_columns(pl.lit(False).alias("_carried"))], how="diagonal_relaxed")
            if carry.height
            else df.with_columns(pl.lit(False).alias("_carried"))
        )
        nested = nest(work.drop("depth", "parent_id", strict=False), ["pid", "tid"], "region_id")
        last = df.row(-1, named=True)
        carry = nested.filter(
            (pl.col("pid") == last["pid"]) & (pl.col("tid") == last["tid"]) & (pl.col("end_ns") > last["start_ns"])
        )
        carry = carry.with_columns(pl.lit(True).alias("_carried"))
        yield nested.filter(~pl.col("_carried")).drop("_carried").sort("region_id")


def _domains(conn: sqlite3.Connection, cols: set[str]) -> pl.DataFrame:
    """Domain names per (pid, domainId) from domain-creation events; the default domain (0) is null."""
    sch: dict[str, pl.DataType] = {"pid": _I64, "domain_id": _I64, "domain": pl.String()}
    if not {"domainId", "text"} <= cols:
        return pl.DataFrame(schema=sch)
    sql = f'SELECT globalTid, "domainId", "text" FROM {NVTX_TABLE} WHERE eventType = {DOMAIN_CREATE}'
    raw = read_frame(conn, sql, {"gtid": _I64, "domain_id": _I64, "domain": pl.String()})
    return raw.select(pid_of(pl.col("gtid")).alias("pid"), "domain_id", "domain").unique(
        ["pid", "domain_id"], keep="last"
    )


def op_rows(regions: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    """Un-numbered ops rows (with the region_id of their range) for the NVTX ranges of ``regions``
    whose text carries shapes (usually none)."""
    names = regions.select(pl.col("name").unique()).drop_nulls()["name"]
    emit = names.filter(names.str.contains(r", sizes = \["))
    pyprof = names.filter(names.str.starts_with("{") & names.str.contains("'args'"))
    bad: list[str] = []
    parsed = pl.concat([_parse_emit_nvtx(emit), _parse_pyprof(pyprof.to_list(), bad)])
    if bad:  # counted per range, so the count does not depend on how the ranges were chunked
        n = regions.select(pl.col("name").is_in(pl.Series(bad, dtype=pl.String()).implode()).sum()).item()
        dropped["NVTX text looks like a PyProf dict but does not parse"] += int(n)
    source = regions.select("region_id", "name", "pid", "tid", "start_ns", "end_ns")
    if parsed.height == 0:  # the usual case: no join of every range against nothing
        source = source.clear()
    ops = source.join(parsed, on="name", how="inner", maintain_order="left")
    return ops.with_columns(pl.col("op_name").alias("name")).drop("op_name")


def number_ops(rows: pl.DataFrame) -> pl.DataFrame:
    """Give ops rows their ``op_id`` (in pid, tid, start order; ties in the order of their NVTX
    ranges' region_id, whatever order the chunks came in) and nest them per (pid, tid)."""
    if rows.height == 0:
        return schema.empty("ops").drop("trace_id")
    ops = rows.sort("pid", "tid", "start_ns", "region_id").drop("region_id")
    ops = ops.with_row_index("op_id").with_columns(pl.col("op_id").cast(pl.Int64))
    return nest(ops, ["pid", "tid"], "op_id")


_PARSED_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String(),
    "op_name": pl.String(),
    "sequence_number": _I64,
    "input_dims": pl.String(),
    "input_types": pl.List(pl.String()),
    "concrete_inputs": pl.List(pl.String()),
}


def _parse_emit_nvtx(texts: pl.Series) -> pl.DataFrame:
    """``aten::mm, seq = 3, op_id = 9, sizes = [[2, 3], [3, 4]], input_op_ids = [...]`` (vectorised)."""
    df = pl.DataFrame({"name": texts}, schema={"name": pl.String()})
    dims = pl.col("name").str.extract(r", sizes = (\[[\[\]0-9, ]*\])")
    return (
        df.with_columns(
            pl.col("name").str.extract(r"^([^,]+)").str.strip_chars().alias("op_name"),
            pl.col("name").str.extract(r", seq = (-?\d+)").cast(_I64).alias("sequence_number"),
            dims.str.replace_all(" ", "").alias("input_dims"),
            pl.lit(None, dtype=pl.List(pl.String())).alias("input_types"),
            pl.lit(None, dtype=pl.List(pl.String())).alias("concrete_inputs"),
        )
        .filter(pl.col("input_dims").is_not_null())
        .select(list(_PARSED_SCHEMA))
    )


def _parse_pyprof(texts: list[str], bad: list[str]) -> pl.DataFrame:
    """PyProf dictionaries; one Python call per *distinct* text, not per range. Texts that do
    not parse are added to ``bad``."""
    rows: list[dict[str, Any]] = []
    for text in texts:
        try:
            d = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            bad.append(text)
            continue
        if not isinstance(d, dict) or not isinstance(d.get("args"), list) or "op" not in d:
            continue
        dims: list[list[int]] = []
        types: list[str] = []
        concrete: list[str] = []
        for a in d["args"]:
            a = a if isinstance(a, dict) else {}
            shape = a.get("shape")
            if a.get("type") == "tensor" and isinstance(shape, (list, tuple)):
                dims.append([int(x) for x in shape if isinstance(x, int)])
                types.append(PYPROF_DTYPES.get(str(a.get("dtype", "")).replace("torch.", ""), str(a.get("dtype", ""))))
                concrete.append("")
            else:
                dims.append([])
                value = a.get("value")
                types.append("Scalar" if isinstance(value, (int, float)) and not isinstance(value, bool) else "")
                concrete.append("" if value is None else str(value))
        op = str(d["op"]).strip("_")
        rows.append(
            {
                "name": text,
                "op_name": op if "::" in op else f"aten::{op}",
                "sequence_number": d.get("seq") if isinstance(d.get("seq"), int) else None,
                "input_dims": json.dumps(dims, separators=(",", ":")),
                "input_types": types,
                "concrete_inputs": concrete,
            }
        )
    return pl.DataFrame(rows, schema=_PARSED_SCHEMA)
