"""The hardware an analysis uses and the ``device`` block of its result: peaks, ridge, calibration
warnings, or a hint when no peaks are known (tracekit/analysis/pipeline.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.analysis.verdict import peaks_frame
from tracekit.hardware.peaks import Hardware as Hw
from tracekit.hardware.peaks import get
from tracekit.hardware.peaks import load_hardware_file
from tracekit.hardware.peaks import lookup

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware


def resolve_hardware(
    hardware: Hardware | str | os.PathLike[str] | None, devices: list[dict[str, Any]]
) -> Hardware | None:
    """A Hardware from a file path, a table name, an object, or the trace's devices (None if unknown)."""

    if isinstance(hardware, Hw):
        return hardware
    if hardware is None:
        return lookup(devices)
    text = str(hardware)
    if Path(text).is_file() or text.endswith(".json"):
        return load_hardware_file(text)
    return get(text)


def device_block(hw: Hardware | None, device_name: str | None, cpu_only: bool) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": device_name,
        "hardware": None,
        "peaks_source": None,
        "peak_flops_per_s": None,
        "peak_bytes_per_s": None,
        "ridge": None,
    }
    if hw is not None:
        pk = peaks_frame(hw)
        d.update(
            hardware=hw.name,
            peaks_source=hw.source,
            peak_flops_per_s={r["dtype"]: r["peak_flops_per_s"] for r in pk.to_dicts()},
            peak_bytes_per_s=float(hw.mem_bandwidth_bytes_per_s),
            ridge={r["dtype"]: r["ridge"] for r in pk.to_dicts()},
        )
        if getattr(hw, "measured", None) and hw.measured.get(
            "warnings"
        ):  # implausible calibration figures (tracekit calibrate), shown with every verdict
            d["calibration_warnings"] = [str(w) for w in hw.measured["warnings"]]
    else:
        d["hint"] = (
            f"no peaks known for device {device_name or '(unnamed)'}: pass --hardware NAME "
            "(a device of the table) or --hardware FILE (from `tracekit calibrate`); in Python "
            "analyze(trace, hardware=NAME|FILE)"
        )
    return d
