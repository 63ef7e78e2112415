"""Builders for tiny Kineto (Chrome trace JSON) files. Times are integer µs, as Kineto writes them;
the loader turns them into ns (×1000). Device events use pid = device 0, tid = stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tracekit
from tracekit.tables.trace import Trace

PID = 100  # the process; threads are 1 (main), 2 (autograd), 3 (a helper thread)


def _x(cat: str, name: str, ts: int, dur: int, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def region(name: str, ts: int, dur: int, tid: int = 1) -> dict[str, Any]:
    return _x("user_annotation", name, ts, dur, PID, tid)


def gpu_region(name: str, ts: int, dur: int, stream: int = 7) -> dict[str, Any]:
    return _x("gpu_user_annotation", name, ts, dur, 0, stream, device=0, stream=stream)


def op(
    name: str,
    ts: int,
    dur: int,
    tid: int = 1,
    ext: int | None = None,
    seq: int | None = None,
    dims: list[Any] | None = None,
    types: list[str] | None = None,
) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if ext is not None:
        args["External id"] = ext
    if seq is not None:
        args["Sequence number"] = seq
    if dims is not None:
        args["Input Dims"] = dims
        args["Input type"] = types or ["c10::BFloat16"] * len(dims)
    return _x("cpu_op", name, ts, dur, PID, tid, **args)


def launch(
    ts: int, corr: int, tid: int = 1, ext: int | None = None, name: str = "cudaLaunchKernel", dur: int = 1
) -> dict[str, Any]:
    args: dict[str, Any] = {"correlation": corr}
    if ext is not None:
        args["External id"] = ext
    return _x("cuda_runtime", name, ts, dur, PID, tid, **args)


def kernel(name: str, ts: int, dur: int, corr: int, stream: int = 7, graph: int | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"correlation": corr, "device": 0, "stream": stream}
    if graph is not None:
        args["graph id"] = graph
    return _x("kernel", name, ts, dur, 0, stream, **args)


def write(path: Path, events: list[dict[str, Any]], devices: bool = True) -> Path:
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if devices:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]
    path.write_text(json.dumps(doc))
    return path


def load(tmp_path: Path, events: list[dict[str, Any]], name: str = "golden.json", devices: bool = True) -> Trace:
    return tracekit.load(str(write(tmp_path / name, events, devices)))
