"""Phase-shape sweep: one d×d projection ``y = x @ Wᵀ`` with x of m rows.

Prefill is m prompt rows, decode is m batch rows: the same GEMM, so the sweep shows where
execution changes character as m grows. Before a shape runs, its optimistic arithmetic intensity
is computed from

    FLOPs = 2·m·d²        min bytes = (d² + m·d + m·d) · element size   (weights, input, output)

The pure functions (``shape_costs``, ``find_knee``) need no torch; ``run_sweep`` does.
"""

from __future__ import annotations

import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.workloads.config import SHORT, PhaseShapeConfig, as_dict, element_size

KNEE_FRACTION = 0.9  # a shape is "on the plateau" at >= 90 % of the sweep's best FLOP/s
# After the knee throughput must stay within noise of the knee's: at least (1 − tolerance) of it, the
# tolerance being this share or a later shape's own measured spread (slowest / fastest − 1), if larger.
KNEE_NOISE = 0.1


@dataclass(frozen=True)
class ShapeCost:
    flops: int
    min_bytes: int

    @property
    def intensity(self) -> float:
        """FLOP per byte of the minimum traffic (each tensor read or written once)."""
        return self.flops / self.min_bytes


def shape_costs(m: int, d: int, dtype: str) -> ShapeCost:
    """Costs of one m×d by d×d GEMM. d=2048 fp32 m=256 → 102.4 FLOP/B (2·256·2048² / (2048²+2·256·2048)·4)."""
    es = element_size(dtype)
    return ShapeCost(flops=2 * m * d * d, min_bytes=(d * d + 2 * m * d) * es)


def find_knee(
    m: list[int],
    flops_per_s: list[float],
    fraction: float = KNEE_FRACTION,
    spreads: list[float] | None = None,
) -> int | None:
    """Index (into the given lists) of the shape where throughput stops rising with m.

    The smallest m that reaches ``fraction`` of the sweep's best achieved FLOP/s, provided a larger
    m was measured too (otherwise throughput was still rising at the end of the sweep: None) and
    throughput stays within noise of that level at every larger m (:func:`fall_after`; else it
    is no plateau: None). ``spreads``: each shape's slowest / fastest repeat, its own noise.
    """
    i = _candidate(m, flops_per_s, fraction)
    return None if i is None or fall_after(m, flops_per_s, i, spreads) is not None else i


def _candidate(m: list[int], flops_per_s: list[float], fraction: float) -> int | None:
    """The smallest m reaching ``fraction`` of the best FLOP/s, unless it is the largest m."""
    if len(m) < 2:
        return None
    best = max(flops_per_s)
    order = sorted(range(len(m)), key=lambda i: (m[i], i))
    for i in order:
        if flops_per_s[i] >= fraction * best:
            return None if m[i] == max(m) else i
    return None  # pragma: no cover - the best shape always qualifies


def fall_after(m: list[int], flops_per_s: list[float], i: int, spreads: list[float] | None = None) -> int | None:
    """Index of the slowest shape of larger m than shape ``i`` whose throughput falls below (1 −
    tolerance) × shape ``i``'s, tolerance = max(:data:`KNEE_NOISE`, its spread − 1); None when
    every larger m stays within noise of that level."""
    tol = [max(KNEE_NOISE, (spreads[j] - 1) if spreads and spreads[j] is not None else 0.0) for j in range(len(m))]
    low = [j for j in range(len(m)) if m[j] > m[i] and flops_per_s[j] < (1 - tol[j]) * flops_per_s[i]]
    return min(low, key=lambda j: (flops_per_s[j], j)) if low else None


def knee_note(m: list[int], flops_per_s: list[float], spreads: list[float] | None = None) -> str | None:
    """Why no knee is announced although one shape reached the plateau: "throughput falls after
    m=64 (78.9 → 37.6 GFLOP/s at m=256), beyond noise: no knee", or None."""
    i = _candidate(m, flops_per_s, KNEE_FRACTION)
    j = None if i is None else fall_after(m, flops_per_s, i, spreads)
    if i is None or j is None:
        return None
    return (
        f"throughput falls after m={m[i]} ({flops_per_s[i] / 1e9:.1f} → {flops_per_s[j] / 1e9:.1f} GFLOP/s at "
        f"m={m[j]}), beyond noise: no knee"
    )


def shapes_of(cfg: PhaseShapeConfig) -> list[tuple[str, int]]:
    return [("prefill", m) for m in cfg.prefill_rows] + [("decode", m) for m in cfg.decode_rows]


def stem_of(kind: str, m: int) -> str:
    return f"phase_shape_{kind}_m{m}"


@dataclass(frozen=True)
class SweepResult:
    table: pl.DataFrame
    summary: dict[str, Any]
    files: list[Path]


def run_sweep(cfg: PhaseShapeConfig, out: Path) -> SweepResult:
    """Run every shape under torch.profiler (schedule: warm-up cycles discarded), one trace and one
    sidecar per shape, plus ``phase_shape.csv``/``.parquet`` and ``phase_shape_sweep.json``."""
    import torch
    import torch.nn.functional as F

    from tracekit.annotate import phase
    from tracekit.workloads import profiling as P
    from tracekit.workloads.sidecar import base_sidecar, prepare_out_dir, sidecar_path_for, trace_path, write_json

    dev = P.resolve_device(cfg.device)
    out = prepare_out_dir(out)
    dt = P.torch_dtype(cfg.dtype)
    P.set_threads(cfg.threads)
    env = P.env_info(dev)
    shapes = shapes_of(cfg)
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
    weight = torch.randn(cfg.d, cfg.d, generator=gen).to(device=dev, dtype=dt)
    inputs = [torch.randn(m, cfg.d, generator=gen).to(device=dev, dtype=dt) for _, m in shapes]

    # Cold start: the first call of each shape, before the profiler exists (reported apart).
    cold_ns: list[int] = []
    for x in inputs:
        with P.DeviceTimer(dev) as t:
            F.linear(x, weight)
        cold_ns.append(t.elapsed_ns)

    per_cycle = cfg.warmup + cfg.active
    times: list[list[int]] = [[] for _ in shapes]
    traces: list[Path] = []

    def on_ready(prof: Any) -> None:
        kind, m = shapes[len(traces)]
        path = trace_path(out, stem_of(kind, m))
        P.export(prof, path)
        traces.append(path)

    short = SHORT[cfg.dtype]
    with warnings.catch_warnings():
        # each cycle is exported on its own; torch warns that events do not accumulate across cycles
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with P.make_profiler(dev, cfg.warmup, cfg.active, len(shapes), on_ready) as prof:
            for i in range(len(shapes) * per_cycle):
                s, j = divmod(i, per_cycle)
                kind, m = shapes[s]
                x = inputs[s]
                size = {"tokens": m} if kind == "prefill" else {"batch": m}
                with phase(kind, step=j, **size, d=cfg.d, dtype=short, reps=cfg.reps):
                    with P.DeviceTimer(dev) as t:
                        for _ in range(cfg.reps):
                            F.linear(x, weight)
                if j >= cfg.warmup:
                    times[s].append(t.elapsed_ns)
                prof.step()

    rows = []
    for s, (kind, m) in enumerate(shapes):
        c = shape_costs(m, cfg.d, cfg.dtype)
        per_gemm = statistics.median(times[s]) / cfg.reps
        rows.append(
            {
                "kind": kind,
                "m": m,
                "d": cfg.d,
                "dtype": short,
                "flops": c.flops,
                "min_bytes": c.min_bytes,
                "intensity": c.intensity,
                "intensity_2dp": round(c.intensity, 2),
                "time_ns": per_gemm,
                "time_min_ns": min(times[s]) / cfg.reps,
                "time_max_ns": max(times[s]) / cfg.reps,
                "spread": max(times[s]) / max(min(times[s]), 1),
                "repeats": len(times[s]),
                "cold_ns": float(cold_ns[s]),
                "achieved_flops_per_s": c.flops / per_gemm * 1e9,
                "achieved_bytes_per_s": c.min_bytes / per_gemm * 1e9,
                "trace": traces[s].name,
            }
        )
    table = pl.DataFrame(rows)
    args = (table["m"].to_list(), table["achieved_flops_per_s"].to_list(), table["spread"].to_list())
    knee = find_knee(args[0], args[1], spreads=args[2])
    best = table["achieved_flops_per_s"].max()
    table = table.with_columns(
        (pl.col("achieved_flops_per_s") / best).alias("rel_throughput"),
        (pl.int_range(pl.len()) == (knee if knee is not None else -1)).alias("knee"),
    )
    config = as_dict(cfg)
    warm = {
        "policy": "torch.profiler schedule(wait=0, warmup, active, repeat=shapes): warm-up steps of each "
        "shape are traced and discarded; the cold first call of each shape is timed before "
        "the profiler starts (cold_ns)",
        "warmup_steps": cfg.warmup,
        "active_steps": cfg.active,
        "gemms_per_step": cfg.reps,
    }
    summary = base_sidecar("phase-shape", str(dev), env["device_name"], env["torch_version"], config, warm)
    summary["cpu_threads"] = int(env["cpu_threads"])
    summary["timing"] = "CUDA events around each step" if dev.type == "cuda" else "perf_counter around each step"
    summary["knee"] = (
        None
        if knee is None
        else {
            "kind": rows[knee]["kind"],
            "m": rows[knee]["m"],
            "rule": f"smallest m reaching {KNEE_FRACTION:.0%} of the best FLOP/s, throughput within noise "
            f"(≥ {1 - KNEE_NOISE:.0%} of it, or the shape's own spread) at every larger m",
        }
    )
    note = knee_note(*args)
    if note is not None:
        summary["knee_note"] = note
    # Every row carries the CPU-diagnostic label of a CPU run (null on a GPU), so the CSV/Parquet say it too.
    table = table.with_columns(pl.lit(summary.get("diagnostic"), dtype=pl.String()).alias("diagnostic"))
    summary["shapes"] = table.to_dicts()
    files = []
    for s, row in enumerate(summary["shapes"]):
        side = dict(summary)
        side.pop("shapes")
        side["shape"] = row
        side["step_times_ns"] = times[s]
        files.append(write_json(sidecar_path_for(traces[s]), side))
    table.write_csv(out / "phase_shape.csv")
    table.write_parquet(out / "phase_shape.parquet")
    files += [out / "phase_shape.csv", out / "phase_shape.parquet", write_json(out / "phase_shape_sweep.json", summary)]
    return SweepResult(table=table, summary=summary, files=traces + files)
