"""Process tuning, in one place: what a command does to its own process before the work starts,
and why. Measured as commands (BENCHMARKS.md, "Process tuning"); it changes no result.

- **the C heap's free pages** given back to the system (:func:`release_heap`) after each ingest
  task and between the tables of a streamed Kineto ingest.
- **polars' allocator** (``_RJEM_MALLOC_CONF``), chosen by a command for its input before polars is
  loaded (it is read once, when polars' library loads): `tracekit ingest` returns freed pages at
  once where memory must stay bounded (commands/ingest.py), `tracekit analyze` of a big dataset keeps
  fewer arenas (commands/analyze.py). docs/kineto.md and docs/analysis.md give the figures.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from contextlib import suppress


# What polars' __init__ writes into _RJEM_MALLOC_CONF when it loads (its defaults, then the value it
# found appended): a process started by a Python program that had imported polars inherits it.
POLARS_DEFAULTS = ("dirty_decay_ms:500", "muzzy_decay_ms:1000", "thp:always", "metadata_thp:always")


# What each command sets (the figures: BENCHMARKS.md, "Process tuning"):
# - an ingest that must stay bounded (a streamed trace, Dask tasks) returns freed pages at once;
RETURN_PAGES = "dirty_decay_ms:0,muzzy_decay_ms:0"
# - an analysis of a dataset this large (canonical Parquet bytes, all traces) keeps one arena per
#   two CPUs and returns pages after 0.5 s: the transients of its steps no longer pile up in the peak.
BIG_DATASET_BYTES = 4 << 20
# - and of a trace file this large (its bytes; a gzipped one's times GZIP_RATIO): reading it whole
#   leaves freed pages that the analysis's transients would pile on.
BIG_TRACE_BYTES = 64 << 20
GZIP_RATIO = 10


def analysis_setting(dataset_bytes: int | None, cpus: int | None = None, trace_bytes: int | None = None) -> str | None:
    """The allocator setting for analysing a dataset of ``dataset_bytes`` of canonical Parquet, or a
    trace file of ``trace_bytes`` (inflated, as :func:`trace_size` gives them): one arena per two
    CPUs (at least one), freed pages kept 0.5 s and then returned (``muzzy_decay_ms:0``); polars'
    jemalloc 5.3 default keeps 4 arenas per CPU and lazily freed pages that still count in RSS for
    1 s more. None for a smaller input."""
    big = (dataset_bytes or 0) >= BIG_DATASET_BYTES or (trace_bytes or 0) >= BIG_TRACE_BYTES
    if not big:
        return None
    return f"narenas:{max(1, (cpus or os.cpu_count() or 1) // 2)},dirty_decay_ms:500,muzzy_decay_ms:0"


def trace_size(path: str) -> int | None:
    """About how many bytes the trace file at ``path`` holds once inflated (a ``.gz`` file's size times
    :data:`GZIP_RATIO`); None where it is not a regular file."""
    try:
        size = os.stat(path).st_size
    except (OSError, ValueError):
        return None
    return size * GZIP_RATIO if path.endswith(".gz") else size


def user_setting(value: str | None) -> bool:
    """Whether ``_RJEM_MALLOC_CONF`` holds a choice of the user's: set, and not only what polars
    itself wrote there (its defaults, once or more: inherited from a parent process that had loaded
    polars, e.g. a benchmark harness or a notebook's subprocess)."""
    return value is not None and any(o and o not in POLARS_DEFAULTS for o in value.split(","))


def set_before_polars(choose: Callable[[], str | None]) -> bool:
    """Set ``choose()`` as polars' jemalloc setting, when polars is not loaded yet, the user set
    none (:func:`user_setting`), and ``choose()`` (called only then: it may read the inputs) gives
    one. True when set."""
    if "polars" in sys.modules or user_setting(os.environ.get("_RJEM_MALLOC_CONF")):
        return False
    conf = choose()
    if conf is None:
        return False
    os.environ["_RJEM_MALLOC_CONF"] = conf
    return True


def release_heap() -> None:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``; a no-op off glibc):
    a worker that ingests many traces then starts each from its baseline, not from the high-water
    heap of the previous one, and a streamed ingest does not keep the native scanner's buffers
    resident between tables. Once per task or table, not per allocation (Dask's
    ``MALLOC_TRIM_THRESHOLD_`` does the latter, at ≈ 40 % more CPU: tracekit/parallel.py)."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)  # the process's own symbols: glibc's, where it is glibc
