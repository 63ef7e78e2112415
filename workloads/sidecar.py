"""Run-metadata sidecars and output paths. No torch here (the environment probe takes torch lazily).

A trace ``<stem>.pt.trace.json.gz`` has its sidecar ``<stem>.tracekit.json`` beside it; see
docs/workloads.md for every field.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.conventions import CPU_DIAGNOSTIC, SIDECAR_SUFFIX, TRACE_SUFFIX, read_sidecar, sidecar_path  # noqa: F401 (re-exported)
from tracekit.errors import UsageError

SIDECAR_VERSION = 1
FEATURES_OFF = {"prefix_caching": False, "speculative_decoding": False, "quantization": False}


@dataclass(frozen=True)
class RunResult:
    """What a workload run wrote: its trace, its sidecar, and the sidecar's content."""

    trace: Path
    sidecar: Path
    summary: dict[str, Any]


def trace_path(out: Path, stem: str) -> Path:
    return out / f"{stem}{TRACE_SUFFIX}"


sidecar_path_for = sidecar_path  # the one rule lives in tracekit.conventions


def prepare_out_dir(out: str | os.PathLike[str]) -> Path:
    """Create ``out`` (and parents) unless it exists as a directory; UsageError when it is a file."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--out {str(p)!r} exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {str(p)!r}: {exc.strerror}") from None
    return p


def write_json(path: Path, data: dict[str, Any]) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
    return path


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def base_sidecar(
    workload: str, device: str, device_name: str, torch_version: str, config: dict[str, Any], warmup: dict[str, Any]
) -> dict[str, Any]:
    """Fields every sidecar carries; the caller adds shapes, timings, requests."""
    is_gpu = device.startswith("cuda")
    out: dict[str, Any] = {
        "tracekit_sidecar": SIDECAR_VERSION,
        "workload": workload,
        "device": device,
        "device_name": device_name,
        "is_gpu": is_gpu,
        "torch_version": torch_version,
        "python_version": platform.python_version(),
        "host": platform.node(),
        "config": config,
        "warmup": warmup,
        "features": dict(FEATURES_OFF),
    }
    if not is_gpu:
        out["diagnostic"] = CPU_DIAGNOSTIC
    return out
