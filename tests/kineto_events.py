"""Hand-made Kineto events for the bad-input and hostile-input tests (one definition instead of a
copy per test file). The native-scanner tests build theirs as raw JSON text (tests/kineto_both.py),
where the exact bytes matter."""

from __future__ import annotations

import json
from typing import Any

KERNEL: dict[str, Any] = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "pid": 0,
    "tid": 7,
    "ts": 100,
    "dur": 5,
    "args": {"device": 0, "stream": 7, "correlation": 1},
}


def kernel(i: int, **kw: Any) -> dict[str, Any]:
    """Kernel i: ts 100 + 10 i µs, 5 µs long, correlation i; ``kw`` replaces top-level keys."""
    d: dict[str, Any] = json.loads(json.dumps(KERNEL))
    d["ts"] = 100 + 10 * i
    d["args"]["correlation"] = i
    d.update(kw)
    return d


H100: list[dict[str, Any]] = [
    {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "numSms": 132}
]


def write_trace(folder: Any, events: list[dict[str, Any]], name: str = "t", devices: Any = None) -> Any:
    """``events`` as ``folder/name.json``, a Kineto document on one H100 (``devices`` replaces it)."""
    from pathlib import Path

    p = Path(folder) / f"{name}.json"
    doc = {"schemaVersion": 1, "deviceProperties": H100 if devices is None else devices, "traceEvents": events}
    p.write_text(json.dumps(doc))
    return p


def serve_trace(
    folder: Any, steps: list[tuple[str, float, float, dict[str, Any]]], name: str = "serve", ops: Any = ()
) -> Any:
    """A CPU-only ``tracekit run serve``-style trace: one ``tk:run`` container (token budget 256,
    max seqs 8, chunk 128) around ``steps`` — (kind, start ms, end ms, step attributes) — each a
    ``tk:<kind>`` annotation over one ``aten::mm`` covering it (the op ends at the step's end, so
    the step's time is exactly end − start). Times are shifted by 1 ms so the container starts first.
    ``ops``: extra CPU ops (name, start ms, end ms) on the same thread."""
    from tracekit.annotate import format_phase_name

    def x(cat: str, nm: str, t0: float, t1: float) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": nm, "pid": 1, "tid": 1, "ts": t0 * 1e3, "dur": (t1 - t0) * 1e3}

    end = max(s[2] for s in steps)
    run = format_phase_name("run", workload="serve", token_budget=256, max_seqs=8, chunk=128, stage="measured")
    ev = [x("user_annotation", run, 0.0, end + 2.0)]
    for i, (kind, t0, t1, attrs) in enumerate(steps):
        ev.append(x("user_annotation", format_phase_name(kind, step=i, **attrs), t0 + 1.0, t1 + 1.0))
        ev.append(x("cpu_op", "aten::mm", t0 + 1.001, t1 + 1.0))
    ev += [x("cpu_op", nm, t0 + 1.0, t1 + 1.0) for nm, t0, t1 in ops]
    return write_trace(folder, ev, name=name, devices=[])


def event(cat: str, name: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    """One complete ("X") event; ``args`` as given (keys with spaces through ``**{...}``)."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def op_layers(
    layer: list[tuple[str, list[Any], str | None, int]], repeat: int, dtype: str = "c10::BFloat16"
) -> tuple[list[dict[str, Any]], int]:
    """``repeat`` copies of ``layer`` — (op, Input Dims, kernel or None, kernel µs) — one after the
    other: each op a 4 µs ``cpu_op`` (inputs typed ``dtype``) with its ``cudaLaunchKernel`` and the
    kernel on device 0, stream 7, back to back from 100 µs; an op without a kernel is 10 µs long and
    encloses the ops after it that start within it (a MoE op around its experts). Returns the
    events and the last kernel's end (µs)."""
    ev: list[dict[str, Any]] = []
    t_cpu, t_gpu, c = 10, 100, 0
    for _ in range(repeat):
        for name, dims, kname, us in layer:
            c += 1
            args = {"External id": c, "Input Dims": dims, "Input type": [dtype] * len(dims)}
            if kname is None:
                ev.append(event("cpu_op", name, t_cpu, 10, **args))
                t_cpu += 2
                continue
            ev.append(event("cpu_op", name, t_cpu, 4, **args))
            ev.append(event("cuda_runtime", "cudaLaunchKernel", t_cpu + 1, 2, correlation=c, **{"External id": c}))
            ev.append(event("kernel", kname, t_gpu, us, pid=0, tid=7, device=0, stream=7, correlation=c))
            t_cpu, t_gpu = t_cpu + 10, t_gpu + us
    return ev, t_gpu
