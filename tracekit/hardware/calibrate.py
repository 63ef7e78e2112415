"""Measure this machine's copy bandwidth and matmul FLOP/s into a hardware file.

``measure(device)`` returns a :class:`~tracekit.hardware.peaks.Hardware` whose peaks are the best of a
few timed repetitions (so the file is an *achievable* ceiling, not a datasheet peak):

- bandwidth: ``dst.copy_(src)`` of a large buffer; bytes = 2 x buffer (one read + one write);
- FLOP/s per dtype: an n x n x n matmul; FLOPs = 2 n^3 (the cost model's GEMM convention).

torch is imported lazily (only here); without torch, numpy measures the CPU (fp32/fp64 only);
without either, MissingDependencyError. CPU results carry the diagnostic label
"CPU diagnostic — not GPU evidence". docs/hardware.md describes the output format.

``threads`` pins the CPU intra-op thread count for the measurement (a trace recorded with
``--threads 1`` must be judged against a one-thread ceiling, not all cores); it is recorded in
``measured["threads"]``. :func:`plausibility` lists figures that cannot be a real ceiling (a ridge
below 1 FLOP/B, the numpy fallback, noisy repeats or a busy machine) and ``measure`` stores them in
``measured["warnings"]``; each measurement's spread (slowest ÷ fastest repeat) is in
``measured["spread"]`` and the load average before and after in ``measured["load_before"]`` /
``["load_after"]`` with ``["cpus"]``.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Final

from tracekit.conventions import CPU_DIAGNOSTIC
from tracekit.errors import MissingDependencyError, UsageError
from tracekit.hardware.peaks import Hardware


@dataclass(frozen=True)
class Sizes:
    """Problem sizes: copy buffer bytes, matmul n, timed repetitions (best one kept)."""

    copy_bytes: int
    matmul_n: int
    repeats: int


SIZES: Final[dict[tuple[str, bool], Sizes]] = {
    ("cpu", False): Sizes(256 * 2**20, 1024, 5),
    ("cpu", True): Sizes(8 * 2**20, 256, 3),
    ("cuda", False): Sizes(2 * 2**30, 8192, 10),
    ("cuda", True): Sizes(64 * 2**20, 1024, 3),
}


def _timed(fn: Callable[[], object], sync: Callable[[], None], repeats: int) -> tuple[float, float]:
    """(best wall time in seconds, slowest ÷ fastest) of ``fn`` over ``repeats`` runs, after one
    warm-up: the best is the ceiling kept, the spread says how noisy the machine was meanwhile."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(max(time.perf_counter() - t0, 1e-9))
    return min(times), max(times) / min(times)


def _load() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _torch_measure(
    device: str, sizes: Sizes, threads: int = 0, only: tuple[str, ...] | None = None
) -> tuple[float, dict[str, float], dict[str, Any]]:
    import torch  # lazy: tracekit never imports torch at module level

    before = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        bandwidth, peaks, info = _torch_rates(torch, device, sizes, only)
    finally:
        torch.set_num_threads(before)
    info["threads"] = threads if threads > 0 else before
    return bandwidth, peaks, info


def _torch_rates(
    torch: Any, device: str, sizes: Sizes, only: tuple[str, ...] | None = None
) -> tuple[float, dict[str, float], dict[str, Any]]:

    dev = torch.device("cuda" if device == "cuda" else "cpu")

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    n_elems = sizes.copy_bytes // 4
    src = torch.ones(n_elems, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    runs = {"copy": _timed(lambda: dst.copy_(src), sync, sizes.repeats)}
    del src, dst

    n = sizes.matmul_n
    dtypes: dict[str, Any] = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if device == "cuda":
        dtypes["fp16"] = torch.float16
    if only is not None:
        dtypes = {k: v for k, v in dtypes.items() if k in only}
    for name, dt in dtypes.items():
        try:
            a = torch.randn(n, n, device=dev).to(dt)
            b = torch.randn(n, n, device=dev).to(dt)
            runs[name] = _timed(lambda: torch.mm(a, b), sync, sizes.repeats)
        except RuntimeError:  # dtype not supported for matmul on this device
            continue
    if device == "cuda" and (only is None or "tf32" in only):
        old = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = True
            a = torch.randn(n, n, device=dev)
            b = torch.randn(n, n, device=dev)
            runs["tf32"] = _timed(lambda: torch.mm(a, b), sync, sizes.repeats)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    bandwidth, peaks, info = _rates(runs, n, n_elems * 4, f"torch {torch.__version__}")
    if device == "cuda":
        info["device_name"] = torch.cuda.get_device_name(0)
    return bandwidth, peaks, info


def _rates(
    runs: dict[str, tuple[float, float]], n: int, copied: int, backend: str
) -> tuple[float, dict[str, float], dict[str, Any]]:
    """(copy bandwidth, matmul FLOP/s per dtype, info with each run's seconds and spread) of the
    timed ``runs`` (``copy``: ``copied`` bytes read and written; each dtype: an n³ matmul)."""
    peaks = {k: 2.0 * n**3 / t for k, (t, _) in runs.items() if k != "copy"}
    seconds = {k: t for k, (t, _) in runs.items()}
    spread = {k: sp for k, (_, sp) in runs.items()}
    return 2.0 * copied / runs["copy"][0], peaks, {"backend": backend, "seconds": seconds, "spread": spread}


def _numpy_measure(sizes: Sizes, threads: int = 0) -> tuple[float, dict[str, float], dict[str, Any]]:
    import numpy as np  # its BLAS thread count is fixed at import (OMP_NUM_THREADS); not set here

    n_elems = sizes.copy_bytes // 4
    src = np.ones(n_elems, dtype=np.float32)
    dst = np.empty_like(src)
    runs = {"copy": _timed(lambda: np.copyto(dst, src), lambda: None, sizes.repeats)}
    n = sizes.matmul_n
    rng = np.random.default_rng(0)
    for name, dt in {"fp32": np.float32, "fp64": np.float64}.items():
        a = rng.standard_normal((n, n)).astype(dt)
        b = rng.standard_normal((n, n)).astype(dt)
        runs[name] = _timed(lambda: np.matmul(a, b), lambda: None, sizes.repeats)
    bandwidth, peaks, info = _rates(runs, n, n_elems * 4, f"numpy {np.__version__}")
    info.update({"fallback": True, "threads": threads if threads > 0 else None})
    return bandwidth, peaks, info


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


MIN_RIDGE: Final = 1.0  # FLOP/B; a matmul ceiling below the copy rate is not a real roof
NOISY_SPREAD: Final = 2.0  # slowest / fastest repeat above this: a noisy measurement (the project's noise bar)
BUSY_LOAD: Final = 0.5  # 1-minute load average per CPU at or above this before measuring: a busy machine


def plausibility(peaks: dict[str, float], bandwidth: float, info: dict[str, Any]) -> list[str]:
    """Why these figures cannot be trusted as a ceiling (empty when nothing is wrong).

    - a ridge (peak FLOP/s / bandwidth) below 1 FLOP/B for a dtype: a matmul that does fewer
      FLOPs per second than the machine copies bytes is not running a tuned kernel;
    - the numpy fallback: not the library that ran the profiled work;
    - quick sizes: too small to reach a steady ceiling;
    - noisy repeats: a measurement whose slowest repeat is more than :data:`NOISY_SPREAD` × its
      fastest (``info["spread"]``), or a machine already loaded (``info["load_before"]`` ≥
      :data:`BUSY_LOAD` per CPU): the best kept may be far below the real ceiling.
    """
    out = [
        f"implausible: {dtype} ridge {peak / bandwidth:.3g} FLOP/B < {MIN_RIDGE:g} "
        f"(matmul slower than the copy rate; no tuned {dtype} kernel on this machine?)"
        for dtype, peak in sorted(peaks.items())
        if bandwidth > 0 and peak / bandwidth < MIN_RIDGE
    ]
    if info.get("fallback"):
        out.append(
            f"implausible: measured with the numpy fallback ({info.get('backend')}), not torch; "
            "install the workloads extra for a ceiling of what the workload ran"
        )
    if info.get("quick"):
        out.append("quick sizes: a smoke test, not a reliable ceiling")
    noisy = {k: v for k, v in sorted((info.get("spread") or {}).items()) if v > NOISY_SPREAD}
    if noisy:
        which = ", ".join(f"{k} {v:.1f}×" for k, v in noisy.items())
        out.append(
            f"calibration noisy: repeats vary ({which}; slowest / fastest > {NOISY_SPREAD:g}×): the best "
            "kept may still be low — measure again on an idle machine"
        )
    load, cpus = info.get("load_before"), info.get("cpus")
    if isinstance(load, (int, float)) and isinstance(cpus, int) and cpus > 0 and load / cpus >= BUSY_LOAD:
        out.append(
            f"calibration on a busy machine: load average {load:.1f} on {cpus} CPUs before measuring "
            f"(≥ {BUSY_LOAD:g} per CPU): the ceiling may be too low — measure again on an idle machine"
        )
    return out


def measure(
    device: str = "cpu", quick: bool = False, threads: int = 0, dtypes: tuple[str, ...] | None = None
) -> Hardware:
    """Measure ``device`` ("cpu", "cuda" or "auto"); ``quick`` uses small sizes (tests, smoke runs);
    ``threads`` > 0 pins the CPU intra-op threads during the measurement (0: the library default);
    ``dtypes`` limits the matmuls to those dtypes (e.g. ``("fp32",)``: the one a sweep ran in).

    Raises UsageError for an unknown or absent device, MissingDependencyError when neither torch
    nor numpy is installed.
    """
    if device == "auto":
        device = "cuda" if _cuda_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device!r}: choose cpu, cuda or auto")
    if device == "cuda" and not _cuda_available():
        raise UsageError("--device cuda: no CUDA device visible to torch on this machine (try --device cpu)")
    if threads < 0:
        raise UsageError(f"--threads {threads}: must be 0 (library default) or more")
    sizes = SIZES[(device, quick)]
    load_before = _load()
    try:
        bandwidth, peaks, info = _torch_measure(device, sizes, threads, dtypes)
    except ImportError:
        try:
            bandwidth, peaks, info = _numpy_measure(sizes, threads)
        except ImportError:
            raise MissingDependencyError(
                "tracekit calibrate needs torch or numpy: pip install 'tracekit[workloads]'"
            ) from None
    if device == "cpu":
        desc = f"CPU {platform.machine()} {platform.processor() or ''}".strip()
    else:
        desc = str(info.get("device_name", "CUDA device"))
    info.update(
        {
            "device": device,
            "copy_bytes": sizes.copy_bytes,
            "matmul_n": sizes.matmul_n,
            "repeats": sizes.repeats,
            "quick": quick,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_before": load_before,
            "load_after": _load(),
            "cpus": os.cpu_count(),
        }
    )
    info["warnings"] = plausibility(peaks, bandwidth, info)
    per = (
        f", {info['threads']} thread{'s' if info['threads'] != 1 else ''}"
        if device == "cpu" and info.get("threads")
        else ""
    )
    return Hardware(
        name=f"calibrated: {desc}",
        peak_flops_per_s=peaks,
        mem_bandwidth_bytes_per_s=bandwidth,
        source=(
            f"tracekit calibrate ({info['backend']}): best of {sizes.repeats} x copy of "
            f"{sizes.copy_bytes / 2**20:.0f} MiB and {sizes.matmul_n}^3 matmul per dtype{per}"
        ),
        key="calibrated",
        device_name=desc,
        matched_by="measured by tracekit calibrate",
        diagnostic=CPU_DIAGNOSTIC if device == "cpu" else None,
        notes="achieved rates on this machine, not datasheet peaks",
        measured=info,
    )


MAX_AGE_S: Final = 7 * 24 * 3600  # a kept calibration is measured again after a week


def boot_time() -> float | None:
    """When this machine last started (``btime`` of /proc/stat, epoch seconds); None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def stale_reason(
    doc: Any, device: str, threads: int, quick: bool, now: float | None = None, booted: float | None = None
) -> str | None:
    """Why a stored calibration (``doc``: the hardware file's JSON) does not describe this machine's
    state now, or None when it does: it must be a calibration of the same device, thread count and
    size, flagged by nothing (noise, a busy machine, an implausible ridge), measured since this
    machine last started (``booted``; frequency, governor and neighbours reset with a boot) and
    less than :data:`MAX_AGE_S` ago. ``now`` defaults to the clock."""
    m = doc.get("measured") if isinstance(doc, dict) else None
    if not isinstance(m, dict) or doc.get("key") != "calibrated":
        return "not a calibration written by tracekit calibrate"
    if device != "auto" and m.get("device") != device:
        return f"measured on {m.get('device')!r}, asked {device!r}"
    if m.get("threads") != threads:
        return f"measured with {m.get('threads')} thread(s), asked {threads}"
    if bool(m.get("quick")) != quick:
        return "measured with " + ("--quick sizes" if m.get("quick") else "full sizes") + ", asked otherwise"
    warns = m.get("warnings")
    if warns:
        return f"flagged when measured: {warns[0] if isinstance(warns, list) else warns}"
    try:
        when = datetime.strptime(str(m.get("measured_at")), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (ValueError, OverflowError):
        return "no readable measurement time"
    now = time.time() if now is None else now
    if booted is not None and when < booted:
        return "measured before this machine last started"
    if now - when > MAX_AGE_S:
        return f"measured {int((now - when) // 86400)} days ago (more than {MAX_AGE_S // 86400})"
    return None
