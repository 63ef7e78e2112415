"""Layer 0: the project's conventions, defined once. Imports nothing from tracekit but ``errors``.

- ``CPU_DIAGNOSTIC``: the label every output of a CPU-only trace carries.
- The sidecar rule: a workload run's trace ``<stem>.pt.trace.json.gz`` (or ``.pt.trace.json``,
  ``.json.gz``, ``.json``) has its run-metadata sidecar ``<stem>.tracekit.json`` beside it.
- ``TABLES``: the canonical table names of a dataset.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Final

CPU_DIAGNOSTIC: Final = "CPU diagnostic — not GPU evidence"

TRACE_SUFFIX: Final = ".pt.trace.json.gz"
SIDECAR_SUFFIX: Final = ".tracekit.json"
_TRACE_SUFFIXES: Final = (TRACE_SUFFIX, ".pt.trace.json", ".json.gz", ".json")

TABLES: Final = ("kernels", "launches", "ops", "regions")


def sidecar_path(trace: str | os.PathLike[str]) -> Path:
    """``dir/x.pt.trace.json.gz`` (or ``.pt.trace.json``, ``.json.gz``, ``.json``) → ``dir/x.tracekit.json``.

    The one sidecar rule: the runner writes the sidecar here and every reader looks here."""
    p = Path(trace)
    name = p.name
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return p.with_name(name + SIDECAR_SUFFIX)


def find_sidecar(trace: str | os.PathLike[str] | None) -> Path | None:
    """The sidecar beside ``trace`` when it exists as a regular file (never through a symlink)."""
    if trace is None:
        return None
    p = sidecar_path(trace)
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return p if stat.S_ISREG(st.st_mode) else None


def read_sidecar(trace: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The sidecar beside ``trace`` as a dict; None when missing, not a regular file, unreadable or not
    a JSON object."""
    p = find_sidecar(trace)
    if p is None:
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
