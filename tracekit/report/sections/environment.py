"""The report's environment block: device and peaks, versions, and the runner's sidecar.

Only named keys are taken from trace metadata (some real traces carry secrets in free-form
metadata, so whole blobs are never printed). The runner writes ``<stem>.tracekit.json`` beside
each trace; its ``config`` / scheduler limits / versions are shown when present.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from tracekit.report import fmt

from tracekit.conventions import find_sidecar, read_regular_text

_META_EXTRA_KEYS = ("cuda_runtime_version", "cuda_driver_version", "cupti_version", "record_shapes", "with_flops")
_DEVICE_KEYS = ("num_sms", "compute_capability", "total_memory_bytes")  # shown for the trace's first device
# key names that may hold secrets or identify people (hf_token, api_key, env, host, user): never printed
_SECRETISH = re.compile(
    r"(^|[_.-])(token|secret|password|passwd|key|auth|cookie|credentials?|env|environ|environment|host|hostname|user|username|dsn)$",
    re.I,
)


def read_sidecar(path: Path) -> dict[str, Any]:
    """The sidecar as a dict; unreadable sidecars give ``{"error": ...}`` rather than failing the report."""
    try:
        data = json.loads(read_regular_text(path))  # never through a symlink, never a FIFO
    except (OSError, ValueError, RecursionError) as exc:
        return {"error": f"unreadable sidecar {path.name}: {exc.__class__.__name__}"}
    return data if isinstance(data, dict) else {"error": f"sidecar {path.name} is not a JSON object"}


# Credentials inside values: user:password@ in a URL/DSN, and key=value pairs of secret-ish keys.
_URL_CREDS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]*@")
_KV_SECRET = re.compile(r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|auth)=[^\s;&,]+")


def _redact(v: Any) -> Any:
    """A value with embedded credentials replaced by ``***`` (strings only)."""
    if not isinstance(v, str):
        return v
    return _KV_SECRET.sub(lambda m: f"{m.group(1)}=***", _URL_CREDS.sub(lambda m: f"{m.group(1)}***@", v))


def _flat(d: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if _SECRETISH.search(str(k)):
            continue
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.extend(_flat(v, key + "."))
        elif isinstance(v, (list, tuple)):
            if len(v) <= 16 and all(isinstance(x, (int, float, str, bool)) or x is None for x in v):
                out.append((key, _redact(", ".join(str(x) for x in v))))
        else:
            out.append((key, _redact(v)))
    return out


def environment(
    meta: Mapping[str, Any] | None,
    device: Mapping[str, Any] | None = None,
    trace_path: str | Path | None = None,
) -> dict[str, Any]:
    """Environment rows for the report: ``{"rows": [(key, value), ...], "sidecar": path|None}``."""
    rows: list[tuple[str, Any]] = []
    meta = meta or {}
    devs = meta.get("devices") or []
    if devs:
        d0 = devs[0]
        rows.append(("trace device", d0.get("name") or "(unnamed)"))
        rows += [(f"trace device {k}", d0[k]) for k in _DEVICE_KEYS if d0.get(k) is not None]
        if len(devs) > 1:
            rows.append(("trace devices", len(devs)))
    dev = device or {}
    if dev.get("name"):
        rows.append(("analysed device", dev.get("name")))
    if dev.get("hardware"):
        src = dev.get("peaks_source") or dev.get("source") or "source unknown"
        rows.append(("peaks from", f"{dev.get('hardware')} ({src})"))
    pf = dev.get("peak_flops_per_s")
    if isinstance(pf, Mapping) and pf:
        rows.append(("peak FLOP/s (dense)", ", ".join(f"{k} {fmt.si(v, 'FLOP/s', 4)}" for k, v in pf.items() if v)))
    if dev.get("peak_bytes_per_s"):
        rows.append(("peak_bytes_per_s", dev["peak_bytes_per_s"]))
    dist = meta.get("distributed") or {}
    if dist.get("world_size"):
        rows.append(("rank / world size", f"{dist.get('rank')} / {dist.get('world_size')}"))
    extra = meta.get("extra") or {}
    rows += [(k, extra[k]) for k in _META_EXTRA_KEYS if extra.get(k) is not None]
    rows += [(f"trace {k}", meta[k]) for k in ("format", "format_version") if meta.get(k) is not None]
    side = find_sidecar(trace_path)
    if side is not None:
        rows += [(f"runner {k}", v) for k, v in _flat(read_sidecar(side))]
    return {"rows": rows, "sidecar": str(side) if side else None}
