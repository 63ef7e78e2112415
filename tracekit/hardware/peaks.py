"""Device peaks: the datasheet table, lookup from a trace's devices, hardware files.

``lookup(devices)`` takes ``trace.meta["devices"]`` (dicts with name, num_sms,
total_memory_bytes, compute_capability, memory_bandwidth_bytes_per_s, clock_hz) and returns the
table's :class:`Hardware` or None. ``load_hardware_file(path)`` reads the JSON format written by
``tracekit calibrate`` (and by :meth:`Hardware.to_dict`). docs/hardware.md documents the table,
its sources, the lookup rules and the file format.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tracekit.errors import AnalysisError, UsageError
from tracekit.inputs import read_json
from tracekit.hardware.table import TABLE

FILE_FORMAT: Final = "tracekit.hardware/1"
# dtype names the cost model emits that share a peak with a table dtype
_ALIASES: Final[dict[str, str]] = {
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp4_e2m1": "fp4",  # torch's Float4_e2m1fn_x2, MXFP4 and NVFP4 elements: the fp4 tensor rate
    "mxfp4": "fp4",
    "nvfp4": "fp4",
}
# Names that do not identify the part: decide by SM/CU count. ROCm names both MI250 and MI250X
# "AMD Instinct MI250X/MI250"; 104 CUs per GCD is an MI250, 110 an MI250X.
_GENERIC: Final = re.compile(r"^(|amd radeon graphics( vf)?|cuda gpu|.*\bmi250x mi250\b.*)$")


@dataclass(frozen=True)
class Hardware:
    """Peak rates of one device. ``peak_flops_per_s``: dtype -> dense peak FLOP/s (aliases such as
    fp8_e4m3 -> fp8 are filled in); ``mem_bandwidth_bytes_per_s``: peak DRAM bytes/s.
    ``reported_bandwidth_bytes_per_s``: what the trace itself said (Nsight exports carry it),
    kept visible beside the table's value. ``diagnostic``: set for CPU measurements."""

    name: str
    peak_flops_per_s: dict[str, float]
    mem_bandwidth_bytes_per_s: float
    source: str
    key: str = ""
    device_name: str | None = None
    matched_by: str = ""
    reported_bandwidth_bytes_per_s: float | None = None
    diagnostic: str | None = None
    notes: str = ""
    measured: dict[str, Any] = field(default_factory=dict)
    memory_bytes: float | None = None  # the device's memory (a hardware file's memory_bytes): memory headroom

    def peak(self, dtype: str | None) -> float | None:
        """Peak FLOP/s for ``dtype`` (canonical name, e.g. bf16), or None when the table has none."""
        if dtype is None:
            return None
        return self.peak_flops_per_s.get(dtype) or self.peak_flops_per_s.get(_ALIASES.get(dtype, dtype))

    def ridge(self, dtype: str) -> float:
        """Ridge point in FLOP/byte: peak FLOP/s for ``dtype`` / peak bandwidth.

        Raises AnalysisError when the device has no peak for ``dtype`` (e.g. bf16 on a V100).
        """
        p = self.peak(dtype)
        if p is None or not self.mem_bandwidth_bytes_per_s:
            raise AnalysisError(f"{self.name}: no {dtype} peak in the hardware table; pass --hardware FILE")
        return p / self.mem_bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        """The hardware-file representation (see docs/hardware.md)."""
        base = {k: v for k, v in self.peak_flops_per_s.items() if k not in _ALIASES}
        return {
            "format": FILE_FORMAT,
            "name": self.name,
            "key": self.key,
            "peak_flops_per_s": base,
            "mem_bandwidth_bytes_per_s": self.mem_bandwidth_bytes_per_s,
            "source": self.source,
            "device_name": self.device_name,
            "matched_by": self.matched_by,
            "reported_bandwidth_bytes_per_s": self.reported_bandwidth_bytes_per_s,
            "diagnostic": self.diagnostic,
            "notes": self.notes,
            "measured": self.measured,
            **({"memory_bytes": self.memory_bytes} if self.memory_bytes else {}),
        }


def _with_aliases(peaks: dict[str, float]) -> dict[str, float]:
    return {**peaks, **{a: peaks[b] for a, b in _ALIASES.items() if b in peaks and a not in peaks}}


def _norm(name: str | None) -> str:
    return re.sub(r"[^a-z0-9]+", " ", (name or "").lower()).strip()


def _from_entry(e: dict[str, Any], device: dict[str, Any] | None, matched_by: str) -> Hardware:
    reported = device.get("memory_bandwidth_bytes_per_s") if device else None
    return Hardware(
        name=e["name"],
        peak_flops_per_s=_with_aliases({k: float(v) * 1e12 for k, v in e["tflops"].items()}),
        mem_bandwidth_bytes_per_s=float(e["gbps"]) * 1e9,
        source=e["source"],
        key=e["key"],
        device_name=(device.get("name") if device else None),
        matched_by=matched_by,
        reported_bandwidth_bytes_per_s=float(reported) if reported else None,
    )


def _mem_ok(e: dict[str, Any], device: dict[str, Any]) -> bool:
    mem = device.get("total_memory_bytes")
    if not mem or "mem_gib" not in e:
        return True
    lo, hi = e["mem_gib"]
    return bool(lo <= mem / 2**30 < hi)


def table_keys() -> list[str]:
    """Every key of the table (what ``--hardware NAME`` accepts besides device names)."""
    return [e["key"] for e in TABLE]


def _match_one(device: dict[str, Any]) -> Hardware | None:
    raw = device.get("name")
    name = _norm(raw)
    for e in TABLE:  # exact table key or display name
        if name and name in (_norm(e["key"]), _norm(e["name"])):
            return _from_entry(e, device, f"{raw!r} is table entry {e['key']!r}")
    if not _GENERIC.match(name):
        for e in TABLE:
            for pat in e["names"]:
                if re.search(pat, name) and _mem_ok(e, device):
                    return _from_entry(e, device, f"device name {raw!r} matches /{pat}/")
    units, cc = device.get("num_sms"), device.get("compute_capability")
    if units:
        cands = [
            e
            for e in TABLE
            if e.get("units") == units and (cc is None or e.get("cc") in (None, cc)) and _mem_ok(e, device)
        ]
        if cands:
            e = cands[0]
            why = f"device name {raw!r} is empty or generic; {units} SMs/CUs, compute capability {cc}"
            if len(cands) > 1:
                why += f" (also fits {', '.join(c['key'] for c in cands[1:])}; first listed taken)"
            return _from_entry(e, device, why)
    return None


def lookup(devices: list[dict[str, Any]] | None) -> Hardware | None:
    """The table entry for the first device that matches, or None when none does.

    Rules, in order: a table key or display name; the device name against each entry's
    patterns (in table order, with the memory size telling 40 from 80 GB); for an empty or
    generic name ("", "AMD Radeon Graphics"), the SM/CU count with compute capability and memory.
    """
    for d in devices or []:
        if isinstance(d, dict):
            hw = _match_one(d)
            if hw is not None:
                return hw
    return None


def get(name: str) -> Hardware:
    """A table entry by key, display name or device name; UsageError listing the keys otherwise."""
    hw = lookup([{"name": name}])
    if hw is None:
        raise UsageError(f"unknown hardware {name!r}; known: {', '.join(table_keys())} (or pass a hardware file)")
    return hw


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def load_hardware_file(path: str | Path) -> Hardware:
    """Read a hardware JSON file (format in docs/hardware.md). Raises UsageError, one line."""
    p = Path(path)
    doc = read_json(p, "hardware file", UsageError)
    if not isinstance(doc, dict):
        raise UsageError(f"{p}: a hardware file is a JSON object")
    name = doc.get("name")
    peaks = doc.get("peak_flops_per_s")
    bw = doc.get("mem_bandwidth_bytes_per_s")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{p}: 'name' must be a non-empty string")
    if not isinstance(peaks, dict) or not peaks:
        raise UsageError(f"{p}: 'peak_flops_per_s' must be an object of dtype -> FLOP/s")
    bad = [k for k, v in peaks.items() if not _positive(v)]
    if bad:
        raise UsageError(f"{p}: peak_flops_per_s[{bad[0]!r}] must be a positive number")
    if not _positive(bw):
        raise UsageError(f"{p}: 'mem_bandwidth_bytes_per_s' must be a positive number")
    diag = doc.get("diagnostic")
    reported = doc.get("reported_bandwidth_bytes_per_s")
    measured = doc.get("measured")
    return Hardware(
        name=name.strip(),
        peak_flops_per_s=_with_aliases({str(k): float(v) for k, v in peaks.items()}),
        mem_bandwidth_bytes_per_s=float(bw or 0.0),
        source=str(doc.get("source") or f"hardware file {p.name}"),
        key=str(doc.get("key") or ""),
        device_name=doc.get("device_name") if isinstance(doc.get("device_name"), str) else None,
        matched_by=f"hardware file {p}",
        reported_bandwidth_bytes_per_s=float(reported) if reported is not None and _positive(reported) else None,
        diagnostic=diag if isinstance(diag, str) and diag else None,
        notes=str(doc.get("notes") or ""),
        measured=measured if isinstance(measured, dict) else {},
        memory_bytes=float(doc["memory_bytes"]) if _positive(doc.get("memory_bytes")) else None,
    )
