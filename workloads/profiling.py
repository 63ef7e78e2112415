"""Torch-side helpers shared by the workloads: device, dtype, timing, profiler. Imports torch."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from tracekit.errors import UsageError
from tracekit.workloads.config import canonical_dtype, check_device_name
from tracekit.workloads.sidecar import cpu_name

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def set_threads(n: int) -> None:
    """Pin CPU intra-op threads (0 keeps torch's default). One thread is steadier on a busy host."""
    if n > 0:
        torch.set_num_threads(n)


def resolve_device(name: str) -> torch.device:
    """A usable torch device; UsageError for an unknown name or CUDA without a GPU."""
    name = check_device_name(name)
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"--device {name}: no CUDA GPU is available (torch {torch.__version__})")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s)")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[canonical_dtype(name)]


def device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return str(torch.cuda.get_device_name(dev))
    return cpu_name()


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def now_ns(dev: torch.device) -> int:
    """Host wall clock (``time.time_ns``, the clock Kineto's timestamps use) after the device is idle."""
    sync(dev)
    return time.time_ns()


class DeviceTimer:
    """Elapsed device time of a block: CUDA events on a GPU, perf_counter after the block on CPU."""

    def __init__(self, dev: torch.device) -> None:
        self.dev = dev
        self.elapsed_ns = 0

    def __enter__(self) -> "DeviceTimer":
        if self.dev.type == "cuda":
            self._a = torch.cuda.Event(enable_timing=True)
            self._b = torch.cuda.Event(enable_timing=True)
            self._a.record()
        else:
            self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dev.type == "cuda":
            self._b.record()
            self._b.synchronize()
            self.elapsed_ns = int(round(self._a.elapsed_time(self._b) * 1e6))
        else:
            self.elapsed_ns = time.perf_counter_ns() - self._t0


def activities(dev: torch.device) -> list[ProfilerActivity]:
    acts = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def make_profiler(
    dev: torch.device,
    warmup: int,
    active: int,
    repeat: int,
    on_ready: Callable[[Any], None],
    profile_memory: bool = False,
) -> profile:
    """torch.profiler with ``schedule(wait=0, warmup, active, repeat)``: warm-up steps are traced and
    discarded; each cycle's active steps go to ``on_ready`` (which exports them once).
    ``profile_memory`` records the allocator's ``[memory]`` events (CPU allocations on a CPU run)."""
    return profile(
        activities=activities(dev),
        schedule=schedule(wait=0, warmup=warmup, active=active, repeat=repeat),
        on_trace_ready=on_ready,
        record_shapes=True,
        profile_memory=profile_memory,
    )


def export(prof: Any, path: Path) -> None:
    """Export the finished cycle (a ``.gz`` name writes gzip). A profile can be exported once."""
    prof.export_chrome_trace(str(path))


def env_info(dev: torch.device) -> dict[str, str]:
    return {
        "device_name": device_name(dev),
        "torch_version": str(torch.__version__),
        "cpu_threads": str(torch.get_num_threads()),
    }
