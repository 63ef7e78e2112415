"""nsys export → canonical ``kernels`` (kernels, memcpy, memset) and ``launches`` tables.

Integer columns are read from SQLite in chunks; names are joined from ``StringIds`` in polars
(one copy of each distinct string, shared by every row that uses it).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator

import polars as pl

from tracekit.tables import schema
from tracekit.tables.dictstr import coalesce_shared
from tracekit.sources.nsys.sql import col, columns, correlation_of, count, iter_frames, pid_of, tid_of, times_ok

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"

# nsys enums (ENUM_CUDA_MEMCPY_OPER / ENUM_CUDA_MEM_KIND in 3.x exports; same ids in 2.x).
# Short copy-kind names follow Kineto's ("Memcpy HtoD (Pageable -> Device)").
COPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UvmHtoD",
    12: "UvmDtoH",
    13: "UvmDtoD",
}
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
# RUNTIME eventClass: 0 = CUDA runtime, 1 = CUDA driver. Others (67 = CUDA backtrace, ...) repeat
# the correlationId of a real call and are excluded.
API_CLASSES = {0: "runtime", 1: "driver"}

_I64 = pl.Int64()
_VERSION_TAG = r"_v\d+$"  # cudaLaunchKernel_v7000 → cudaLaunchKernel


# What each reader selects: alias → nsys column (NULL where the export lacks it; start and end are required).
_TIMED = {
    "start_ns": "start",
    "end_ns": "end",
    "device": "deviceId",
    "stream": "streamId",
    "corr": "correlationId",
    "gpid": "globalPid",
}


def _rows(conn: sqlite3.Connection, table: str, fields: dict[str, str], where: str = "") -> Iterator[pl.DataFrame]:
    """``table``'s ``fields`` (alias → column), every one Int64, chunk by chunk."""
    cols = columns(conn, table)
    sel = (f'"{c}" AS {a}' if c in ("start", "end") else col(cols, c, a) for a, c in fields.items())
    return iter_frames(conn, f'SELECT {", ".join(sel)} FROM "{table}" {where}', dict.fromkeys(fields, _I64))


def _finish_device(df: pl.DataFrame, dropped: Counter[str], what: str) -> pl.DataFrame:
    bad = int(df.select((~times_ok()).sum()).item())
    if bad:
        dropped[f"{what}: missing start/end, end < start, or beyond ±2^62 ns"] += bad
        df = df.filter(times_ok())
    return df.with_columns(correlation_of(pid_of(pl.col("gpid")), pl.col("corr")).alias("correlation")).drop(
        "corr", "gpid"
    )


def read_kernels(
    conn: sqlite3.Connection, have: set[str], strings: pl.DataFrame, dropped: Counter[str]
) -> Iterator[pl.DataFrame]:
    """Kernel rows (``kind`` = kernel). ``name`` is the demangled name (shortName, then
    mangledName, when it is missing); shared memory = static + dynamic, as Kineto reports it."""
    if KERNEL_TABLE not in have:
        return
    fields = {
        **_TIMED,
        "dn": "demangledName",
        "sn": "shortName",
        "mn": "mangledName",
        "grid_x": "gridX",
        "grid_y": "gridY",
        "grid_z": "gridZ",
        "block_x": "blockX",
        "block_y": "blockY",
        "block_z": "blockZ",
        "registers_per_thread": "registersPerThread",
        "ssm": "staticSharedMemory",
        "dsm": "dynamicSharedMemory",
        "graph_id": "graphId",
        "graph_node_id": "graphNodeId",
    }
    for df in _rows(conn, KERNEL_TABLE, fields):
        for c in ("dn", "sn", "mn"):
            df = df.join(strings.rename({"id": c, "value": f"{c}_s"}), on=c, how="left", maintain_order="left")
        df = df.with_columns(
            pl.lit(schema.KIND_KERNEL).alias("kind"),
            pl.coalesce("dn_s", "sn_s", "mn_s").alias("name"),
            (pl.col("ssm").fill_null(0) + pl.col("dsm").fill_null(0)).alias("shared_memory"),
        ).drop("dn", "sn", "mn", "dn_s", "sn_s", "mn_s", "ssm", "dsm")
        yield _finish_device(df, dropped, "kernel")


def _enum(conn: sqlite3.Connection, have: set[str], table: str, fallback: dict[int, str]) -> dict[int, str]:
    """An nsys ENUM table as id → label when present (3.x), else the built-in copy."""
    if table not in have:
        return fallback
    rows = conn.execute(f'SELECT id, label FROM "{table}"').fetchall()
    return {int(i): str(lbl) for i, lbl in rows} or fallback


def read_memcpy(conn: sqlite3.Connection, have: set[str], dropped: Counter[str]) -> Iterator[pl.DataFrame]:
    """Memcpy rows: ``bytes``, ``copy_kind`` (HtoD, DtoH, DtoD, ...) and a Kineto-style name."""
    if MEMCPY_TABLE not in have:
        return
    fields = {**_TIMED, "bytes": "bytes", "ck": "copyKind", "sk": "srcKind", "dk": "dstKind", "graph_id": "graphId"}
    mem = _enum(conn, have, "ENUM_CUDA_MEM_KIND", MEM_KINDS)
    kinds = pl.col("ck").replace_strict(COPY_KINDS, default="Unknown", return_dtype=pl.String())
    src = pl.col("sk").replace_strict(mem, default="Unknown", return_dtype=pl.String())
    dst = pl.col("dk").replace_strict(mem, default="Unknown", return_dtype=pl.String())
    for df in _rows(conn, MEMCPY_TABLE, fields):
        df = df.with_columns(
            pl.lit(schema.KIND_MEMCPY).alias("kind"),
            kinds.alias("copy_kind"),
            pl.format("Memcpy {} ({} -> {})", kinds, src, dst).alias("name"),
        ).drop("ck", "sk", "dk")
        yield _finish_device(df, dropped, "memcpy")


def read_memset(conn: sqlite3.Connection, have: set[str], dropped: Counter[str]) -> Iterator[pl.DataFrame]:
    """Memset rows: ``bytes`` and the name ``Memset (<memory kind>)`` as Kineto writes it."""
    if MEMSET_TABLE not in have:
        return
    mem = _enum(conn, have, "ENUM_CUDA_MEM_KIND", MEM_KINDS)
    for df in _rows(conn, MEMSET_TABLE, {**_TIMED, "bytes": "bytes", "mk": "memKind", "graph_id": "graphId"}):
        df = df.with_columns(
            pl.lit(schema.KIND_MEMSET).alias("kind"),
            pl.format(
                "Memset ({})", pl.col("mk").replace_strict(mem, default="Unknown", return_dtype=pl.String())
            ).alias("name"),
        ).drop("mk")
        yield _finish_device(df, dropped, "memset")


def read_launches(
    conn: sqlite3.Connection, have: set[str], strings: pl.DataFrame, dropped: Counter[str]
) -> Iterator[pl.DataFrame]:
    """CUDA runtime (eventClass 0) and driver (1) calls; other classes are counted and excluded.

    Runtime names lose their CUDART version tag (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``),
    as Kineto and ``nsys stats`` show them; driver names are kept (``cuMemAlloc_v2`` is the symbol).
    """
    if RUNTIME_TABLE not in have:
        return
    cols = columns(conn, RUNTIME_TABLE)
    where = ""
    if "eventClass" in cols:
        where = f"WHERE eventClass IN ({', '.join(str(c) for c in API_CLASSES)})"
        for cls, n in conn.execute(
            f'SELECT eventClass, count(*) FROM "{RUNTIME_TABLE}" '
            "WHERE eventClass IS NULL OR eventClass NOT IN (0, 1) GROUP BY 1"
        ).fetchall():
            dropped[f"runtime row of eventClass {cls} (not a runtime/driver call; repeats a correlationId)"] += int(n)
    fields = {
        "start_ns": "start",
        "end_ns": "end",
        "cls": "eventClass",
        "gtid": "globalTid",
        "corr": "correlationId",
        "name_id": "nameId",
    }
    lookup = strings.rename({"id": "name_id", "value": "name"})
    # The version tag is cut once per string id, not per row (a row's own copy of a 2 MB name
    # shared by ~990 calls was 2 GB); the other rows keep the shared StringIds value.
    tagged = lookup.filter(pl.col("name").str.contains(_VERSION_TAG)).select(
        "name_id", pl.lit(True).alias("_runtime"), pl.col("name").str.replace(_VERSION_TAG, "").alias("_untagged")
    )
    api = pl.col("cls").fill_null(0).replace_strict(API_CLASSES, default="runtime", return_dtype=pl.String())
    for df in _rows(conn, RUNTIME_TABLE, fields, where):
        df = df.join(lookup, on="name_id", how="left", maintain_order="left")
        df = df.with_columns(api.alias("api")).with_columns((pl.col("api") == "runtime").alias("_runtime"))
        df = df.join(tagged, on=["name_id", "_runtime"], how="left", maintain_order="left")
        df = coalesce_shared(df, "_untagged", "name", "name")
        df = df.with_columns(
            pid_of(pl.col("gtid")).alias("pid"),
            tid_of(pl.col("gtid")).alias("tid"),
            correlation_of(pid_of(pl.col("gtid")), pl.col("corr")).alias("correlation"),
        )
        bad = int(df.select((~times_ok()).sum()).item())
        if bad:
            dropped["runtime call: missing start/end, end < start, or beyond ±2^62 ns"] += bad
            df = df.filter(times_ok())
        yield df.drop("cls", "gtid", "corr", "name_id", "_untagged", "_runtime")


def source_counts(conn: sqlite3.Connection, have: set[str]) -> dict[str, int]:
    """Row counts of every source table this loader reads (for parse_stats.events_read)."""
    return {t: count(conn, t) for t in (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, RUNTIME_TABLE) if t in have}
