"""Kineto (torch.profiler Chrome trace JSON) → canonical tables.

Raw Kineto field names appear here and nowhere else. Decoding uses msgspec typed structs so
that fields nobody reads are skipped without building Python objects; timestamps are decoded
as raw JSON numbers and converted to int64 ns exactly (decimal string → int), because float64
cannot hold ns fractions of epoch-µs timestamps.
"""

from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit import schema
from tracekit.errors import EmptyTraceError, TraceFormatError
from tracekit.intervals import nest
from tracekit.trace import Trace

# Category → table. Old (≤ 2021) names map to the same tables.
KERNEL_CATS = {"kernel": schema.KIND_KERNEL, "Kernel": schema.KIND_KERNEL,
               "gpu_memcpy": schema.KIND_MEMCPY, "Memcpy": schema.KIND_MEMCPY,
               "gpu_memset": schema.KIND_MEMSET, "Memset": schema.KIND_MEMSET}
LAUNCH_CATS = {"cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "driver", "Driver": "driver"}
OP_CATS = {"cpu_op", "Operator"}
REGION_CATS = {"user_annotation": schema.REGION_USER, "User": schema.REGION_USER,
               "gpu_user_annotation": schema.REGION_GPU_USER}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "fwdbwd"}


class Args(msgspec.Struct):
    external_id: Any = msgspec.field(default=None, name="External id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    nbytes: Any = msgspec.field(default=None, name="bytes")
    graph_id: Any = msgspec.field(default=None, name="graph id")
    seq: Any = msgspec.field(default=None, name="Sequence number")
    input_dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    input_types: Any = msgspec.field(default=None, name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Strides")
    concrete: Any = msgspec.field(default=None, name="Concrete Inputs")
    name: Any = None  # M events: process_name / thread_name


class Event(msgspec.Struct):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    dur: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    id: Any = None
    args: Args | None = None


class Document(msgspec.Struct):
    traceEvents: list[Event] = []
    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    trace_id: Any = None
    record_shapes: Any = None
    with_flops: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    traceName: Any = None


_DECODER = msgspec.json.Decoder(Document)


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == b"\x1f\x8b":
        with gzip.open(path, "rb") as gz:
            return gz.read()
    return path.read_bytes()


def load_kineto(path: str | os.PathLike[str], trace_id: str | None = None) -> Trace:
    """Load a Kineto JSON trace (``.json`` or gzip by magic bytes) into canonical tables."""
    from tracekit.sources import make_trace_id

    p = Path(path)
    raw = _read_bytes(p)
    if not raw.strip():
        raise EmptyTraceError(f"{p}: empty file")
    try:
        doc = _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise TraceFormatError(f"{p}: JSON but not a Kineto trace ({exc})") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{p}: not valid JSON ({exc})") from None
    tid = trace_id or make_trace_id(p)
    return build_trace(doc, source=str(p), trace_id=tid)


def _ints(values: list[Any]) -> pl.Series:
    """Best-effort int64 column from raw JSON values (ints, numeric strings, others → null)."""
    return pl.Series([_to_int(v) for v in values], dtype=pl.Int64)


def _to_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9e18 else None
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return None
    return None


def _ns_from_raw(col: pl.Expr) -> pl.Expr:
    """Exact decimal µs text → int64 ns: integer part × 1000 + first three fraction digits."""
    parts = col.str.strip_chars().str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    frac = parts.struct.field("field_1").fill_null("").str.slice(0, 3).str.pad_end(3, "0").cast(pl.Int64, strict=False)
    neg = col.str.strip_chars().str.starts_with("-")
    return pl.when(neg).then(whole * 1000 - frac).otherwise(whole * 1000 + frac)


def build_trace(doc: Document, source: str, trace_id: str) -> Trace:
    """Split decoded events into the canonical tables, counting every event kept or dropped."""
    dropped: Counter[str] = Counter()
    rows: dict[str, list[Event]] = {"kernels": [], "launches": [], "ops": [], "regions": []}
    threads: list[dict[str, Any]] = []
    flows: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    for ev in doc.traceEvents:
        cat = ev.cat if isinstance(ev.cat, str) else ""
        ph = ev.ph
        cats[cat or f"<ph {ph}>"] += 1
        if ph == "X":
            if cat in KERNEL_CATS:
                rows["kernels"].append(ev)
            elif cat in LAUNCH_CATS:
                rows["launches"].append(ev)
            elif cat in OP_CATS:
                rows["ops"].append(ev)
            elif cat in REGION_CATS:
                rows["regions"].append(ev)
            else:
                dropped[f"category not modelled: {cat or '<none>'}"] += 1
        elif ph in ("s", "f", "t") and cat in FLOW_CATS:
            flows[f"{cat}:{ph}"] += 1
        elif ph == "M":
            if ev.name in ("process_name", "thread_name") and ev.args is not None:
                threads.append({"kind": ev.name, "pid": _to_int(ev.pid), "tid": _to_int(ev.tid), "name": ev.args.name})
            else:
                dropped["metadata event"] += 1
        else:
            dropped[f"phase not modelled: {ph}" + (f" ({cat})" if cat else "")] += 1

    base = _to_int(doc.baseTimeNanoseconds) or 0
    tables: dict[str, pl.DataFrame] = {}
    tables["kernels"] = _kernels(rows["kernels"], base, dropped)
    tables["launches"] = _launches(rows["launches"], base, dropped)
    tables["ops"] = _ops(rows["ops"], base, dropped)
    tables["regions"] = _regions(rows["regions"], base, dropped)
    for name, df in tables.items():
        tables[name] = schema.conform(df, name, trace_id)

    read = len(doc.traceEvents)
    kept = sum(df.height for df in tables.values())
    meta = {
        "trace_id": trace_id,
        "source": source,
        "format": "kineto",
        "format_version": doc.schemaVersion,
        "schema_version": schema.SCHEMA_VERSION,
        "devices": _devices(doc.deviceProperties),
        "distributed": _distributed(doc.distributedInfo),
        "time_base_ns": base,
        "threads": threads,
        "flows": dict(flows),
        "categories": dict(cats),
        "parse_stats": {"events_read": read, "events_kept": kept, "dropped": dict(dropped)},
        "warnings": [],
        "extra": {
            k: getattr(doc, k)
            for k in ("trace_id", "record_shapes", "with_flops", "cuda_runtime_version", "cuda_driver_version", "cupti_version", "displayTimeUnit")
            if getattr(doc, k) is not None
        },
    }
    if read == 0:
        raise EmptyTraceError(f"{source}: trace has no events")
    return Trace(meta=meta, **tables)


def _base_frame(evs: list[Event], base: int, dropped: Counter[str], what: str) -> pl.DataFrame:
    df = pl.DataFrame(
        {
            "name": [e.name if isinstance(e.name, str) else None for e in evs],
            "pid": _ints([e.pid for e in evs]),
            "tid": _ints([e.tid for e in evs]),
            "_ts": [bytes(e.ts).decode("ascii", "replace") or None for e in evs],
            "_dur": [bytes(e.dur).decode("ascii", "replace") or None for e in evs],
        },
        schema={"name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "_ts": pl.String, "_dur": pl.String},
    ).with_columns(
        (_ns_from_raw(pl.col("_ts")) + base).alias("start_ns"),
        _ns_from_raw(pl.col("_dur")).alias("_dur_ns"),
    )
    df = df.with_columns((pl.col("start_ns") + pl.col("_dur_ns")).alias("end_ns"))
    bad_ts = df["start_ns"].is_null()
    bad_dur = df["_dur_ns"].is_null() & ~bad_ts
    neg = (df["_dur_ns"] < 0).fill_null(False)
    if bad_ts.any():
        dropped[f"{what}: missing or non-numeric ts"] += int(bad_ts.sum())
    if bad_dur.any():
        dropped[f"{what}: missing or non-numeric dur"] += int(bad_dur.sum())
    if neg.any():
        dropped[f"{what}: negative duration"] += int(neg.sum())
    return df


def _finish(df: pl.DataFrame, dropped: Counter[str], what: str, key: list[str]) -> pl.DataFrame:
    df = df.filter(pl.col("start_ns").is_not_null() & pl.col("_dur_ns").is_not_null() & (pl.col("_dur_ns") >= 0))
    before = df.height
    df = df.unique(subset=key, keep="first", maintain_order=True)
    if df.height < before:
        dropped[f"{what}: duplicate event"] += before - df.height
    return df.drop("_ts", "_dur", "_dur_ns")


def _arg(evs: list[Event], attr: str) -> list[Any]:
    return [getattr(e.args, attr) if e.args is not None else None for e in evs]


def _dim(values: list[Any], i: int) -> pl.Series:
    return pl.Series([_to_int(v[i]) if isinstance(v, list) and len(v) > i else None for v in values], dtype=pl.Int64)


def _kernels(evs: list[Event], base: int, dropped: Counter[str]) -> pl.DataFrame:
    df = _base_frame(evs, base, dropped, "device activity")
    grid, block = _arg(evs, "grid"), _arg(evs, "block")
    df = df.with_columns(
        pl.Series("kind", [KERNEL_CATS[e.cat] for e in evs], dtype=pl.String),
        pl.Series("correlation", _ints(_arg(evs, "correlation"))),
        pl.Series("external_id", _ints(_arg(evs, "external_id"))),
        pl.Series("device", _ints(_arg(evs, "device"))),
        pl.Series("stream", _ints(_arg(evs, "stream"))),
        _dim(grid, 0).alias("grid_x"), _dim(grid, 1).alias("grid_y"), _dim(grid, 2).alias("grid_z"),
        _dim(block, 0).alias("block_x"), _dim(block, 1).alias("block_y"), _dim(block, 2).alias("block_z"),
        pl.Series("registers_per_thread", _ints(_arg(evs, "registers"))),
        pl.Series("shared_memory", _ints(_arg(evs, "shared_memory"))),
        pl.Series("bytes", _ints(_arg(evs, "nbytes"))),
        pl.Series("graph_id", _ints(_arg(evs, "graph_id"))),
    )
    # device/stream args are authoritative; pid/tid are their display copies.
    df = df.with_columns(
        pl.coalesce("device", "pid").alias("device"),
        pl.coalesce("stream", "tid").alias("stream"),
        pl.when(pl.col("kind") == schema.KIND_MEMCPY)
        .then(pl.col("name").str.extract(r"Memcpy (\w+)"))
        .alias("copy_kind"),
    )
    return _finish(df, dropped, "device activity", ["kind", "name", "device", "stream", "start_ns", "end_ns", "correlation"])


def _launches(evs: list[Event], base: int, dropped: Counter[str]) -> pl.DataFrame:
    df = _base_frame(evs, base, dropped, "runtime call")
    df = df.with_columns(
        pl.Series("api", [LAUNCH_CATS[e.cat] for e in evs], dtype=pl.String),
        pl.Series("correlation", _ints(_arg(evs, "correlation"))),
        pl.Series("external_id", _ints(_arg(evs, "external_id"))),
    )
    return _finish(df, dropped, "runtime call", ["name", "pid", "tid", "start_ns", "end_ns", "correlation"])


def _raw_text(values: list[Any]) -> list[str | None]:
    return [bytes(v).decode("utf-8", "replace") or None if v is not None else None for v in values]


def _str_list(values: list[Any]) -> list[list[str] | None]:
    return [[str(x) for x in v] if isinstance(v, list) else None for v in values]


def _ops(evs: list[Event], base: int, dropped: Counter[str]) -> pl.DataFrame:
    df = _base_frame(evs, base, dropped, "cpu op")
    df = df.with_columns(
        pl.Series("external_id", _ints(_arg(evs, "external_id"))),
        pl.Series("sequence_number", _ints(_arg(evs, "seq"))),
        pl.Series("input_dims", _raw_text(_arg(evs, "input_dims")), dtype=pl.String),
        pl.Series("input_types", _str_list(_arg(evs, "input_types")), dtype=pl.List(pl.String)),
        pl.Series("input_strides", _raw_text(_arg(evs, "input_strides")), dtype=pl.String),
        pl.Series("concrete_inputs", _str_list(_arg(evs, "concrete")), dtype=pl.List(pl.String)),
    )
    df = _finish(df, dropped, "cpu op", ["name", "pid", "tid", "start_ns", "end_ns", "external_id"])
    df = df.with_row_index("op_id").with_columns(pl.col("op_id").cast(pl.Int64))
    return nest(df, ["pid", "tid"], "op_id")


def _regions(evs: list[Event], base: int, dropped: Counter[str]) -> pl.DataFrame:
    df = _base_frame(evs, base, dropped, "annotation")
    df = df.with_columns(
        pl.Series("kind", [REGION_CATS[e.cat] for e in evs], dtype=pl.String),
        pl.Series("external_id", _ints(_arg(evs, "external_id"))),
        pl.Series("_device", _ints(_arg(evs, "device"))),
        pl.Series("_stream", _ints(_arg(evs, "stream"))),
    )
    # gpu_user_annotation: pid/tid are device/stream (some traces lack the stream arg).
    df = df.with_columns(
        pl.when(pl.col("kind") == schema.REGION_GPU_USER).then(pl.coalesce("_device", "pid")).otherwise(pl.col("pid")).alias("pid"),
        pl.when(pl.col("kind") == schema.REGION_GPU_USER).then(pl.coalesce("_stream", "tid")).otherwise(pl.col("tid")).alias("tid"),
    ).drop("_device", "_stream")
    df = _finish(df, dropped, "annotation", ["kind", "name", "pid", "tid", "start_ns", "end_ns"])
    df = df.with_row_index("region_id").with_columns(pl.col("region_id").cast(pl.Int64))
    return nest(df, ["kind", "pid", "tid"], "region_id")


def _devices(props: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(props, list):
        for d in props:
            if not isinstance(d, dict):
                continue
            out.append({
                "id": _to_int(d.get("id")),
                "name": d.get("name") if isinstance(d.get("name"), str) else None,
                "num_sms": _to_int(d.get("numSms")),
                "total_memory_bytes": _to_int(d.get("totalGlobalMem")),
                "compute_capability": f"{d.get('computeMajor')}.{d.get('computeMinor')}" if d.get("computeMajor") is not None else None,
                "memory_bandwidth_bytes_per_s": None,
                "clock_hz": None,
            })
    return out


def _distributed(info: Any) -> dict[str, Any]:
    if not isinstance(info, dict):
        return {}
    return {"rank": _to_int(info.get("rank")), "world_size": _to_int(info.get("world_size")), "backend": info.get("backend")}
