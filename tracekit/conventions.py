"""Layer 0: the project's conventions, defined once. Imports nothing from tracekit but ``errors``.

- ``CPU_DIAGNOSTIC``: the label every output of a CPU-only trace carries.
- The sidecar rule: a workload run's trace ``<stem>.pt.trace.json.gz`` (or ``.pt.trace.json``,
  ``.json.gz``, ``.json``) has its run-metadata sidecar ``<stem>.tracekit.json`` beside it.
- ``TABLES``: the canonical table names of a dataset; ``OPTIONAL_TABLES`` those a trace may lack.
- ``MEASURED_COLUMNS``: the cost-model measurements of a row (FLOPs, bytes and the rates from them).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Final

CPU_DIAGNOSTIC: Final = "CPU diagnostic — not GPU evidence"
# how to give the device's peaks, in the CLI's words and the Python API's (one hint for both)
HARDWARE_HINT: Final = "pass --hardware NAME|FILE (Python: analyze(trace, hardware=NAME|FILE))"

TRACE_SUFFIX: Final = ".pt.trace.json.gz"
SIDECAR_SUFFIX: Final = ".tracekit.json"
_TRACE_SUFFIXES: Final = (TRACE_SUFFIX, ".pt.trace.json", ".json.gz", ".json")

TABLES: Final = ("kernels", "launches", "ops", "regions")
OPTIONAL_TABLES: Final = ("memory",)  # written only when a trace has rows for them (schema.OPTIONAL_TABLES)

# A row's cost-model measurements, in the order of the JSON contract (docs/json.md): FLOPs, bytes
# and the rates from them (COST_COLUMNS), and their fractions of the peaks (PEAK_FRACTION_COLUMNS).
# Below the coverage threshold they are not measurements: reports print them as "–".
COST_COLUMNS: Final = ("flops", "bytes", "intensity", "achieved_flops_per_s", "achieved_bytes_per_s")
PEAK_FRACTION_COLUMNS: Final = ("frac_peak_flops", "frac_peak_bytes")
MEASURED_COLUMNS: Final = (*COST_COLUMNS, *PEAK_FRACTION_COLUMNS)
# A fraction of a peak or of a roof above 1 is not a result: the peaks are wrong (docs/analysis.md,
# "Above the roof"). Rows carry ``above_roof`` beside their fractions; every renderer flags it with
# these words, and the verdict's reason ends with them.
ABOVE_ROOF_COLUMN: Final = "above_roof"
ABOVE_ROOF: Final = "above the roof: the ceiling is too low — recalibrate or check the hardware file"
# Opens the analysis's warning for a trace whose ops carry shapes but whose device time is partly
# in ops without a cost model (tracekit/analysis/op_work.py); reports print the Nsight "no operator
# shapes" note only when no such warning exists (no op has shapes).
UNPRICED_OPS: Final = "operators with shapes but no cost model"
# Characters that must never reach a terminal raw from trace data, beyond the C0 controls (which
# JSON always escapes): DEL, the C1 controls, the Unicode bidi/direction marks. Inclusive ranges.
# cli/term.py shows them (and C0) as visible escapes; report/formats/json_print.py as JSON \uXXXX escapes.
TERMINAL_UNSAFE: Final = ((0x7F, 0x9F), (0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069))


def sidecar_path(trace: str | os.PathLike[str]) -> Path:
    """``dir/x.pt.trace.json.gz`` (or ``.pt.trace.json``, ``.json.gz``, ``.json``) → ``dir/x.tracekit.json``.

    The one sidecar rule: the runner writes the sidecar here and every reader looks here."""
    p = Path(trace)
    suffix = next((s for s in _TRACE_SUFFIXES if p.name.endswith(s)), "")
    return p.with_name(p.name.removesuffix(suffix) + SIDECAR_SUFFIX)


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


# Graph replays in the launch table (sources write them, analyses read them): a graph launch call's
# name (any version suffix: cudaGraphLaunch_v10000), the same anchored to a whole call name, and
# the suffix the capture merge gives the per-kernel launch of a replay it mapped to its ops.
GRAPH_LAUNCH_PREFIX_RE: Final = r"^(cuda|hip|cu)GraphLaunch"
GRAPH_LAUNCH_RE: Final = r"^(?:cuda|hip|cu)GraphLaunch(?:_v\d+)?$"  # not hipGraphLaunch:node (one per replayed kernel)
GRAPH_NODE_SUFFIX: Final = ":node"


def read_sidecar(trace: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The sidecar beside ``trace`` as a dict; None when missing, not a regular file, unreadable or not
    a JSON object."""
    p = find_sidecar(trace)
    if p is None:
        return None
    try:
        data = json.loads(read_regular_text(p))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


SIDECAR_MAX_BYTES: Final = 1 << 20


def read_regular_text(path: Path, max_bytes: int = SIDECAR_MAX_BYTES) -> str:
    """The text of ``path`` read only as a regular file: opened without following a symlink
    (``O_NOFOLLOW``) and checked on the open descriptor (no swap between check and read), at
    most ``max_bytes``. OSError otherwise (a symlink, a FIFO, a device, too large)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise OSError(f"{path}: larger than {max_bytes} bytes")
        return fh.read(max_bytes + 1).decode("utf-8", "replace")
