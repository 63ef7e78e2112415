"""Typed errors. Library code raises these; only the CLI prints them and picks the exit code.

Exit codes (docs/robustness.md, "Exit codes"): 0 success; 1 **only** the gate's regression
(``diff --gate``), so CI can tell a regression from anything else; 2 usage; 3 an unreadable
input; 4 a bad dataset; 5 nothing to analyse; 6 a missing dependency; 7 runs not comparable;
8 an I/O error of no input (the output cannot be written, stdout closed or full); 70 an internal
error (a bug: an exception tracekit did not raise on purpose, a polars panic); 130 interrupted."""

from __future__ import annotations

import os


class TracekitError(Exception):
    """Base class of every error tracekit raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code: int = 8


class OutputError(TracekitError):
    """The output cannot be written (stdout closed or on a full disk, an I/O error of no input)."""


class InternalError(TracekitError):
    """An exception tracekit did not raise on purpose: a bug (TRACEKIT_DEBUG=1 shows its traceback)."""

    exit_code = 70


class IngestFailed(TracekitError):
    """``tracekit ingest``: some inputs could not be read (or written); the others were ingested."""

    exit_code = 3


class UsageError(TracekitError):
    """Bad arguments or paths given by the user (before any work starts)."""

    exit_code = 2


class TraceFormatError(TracekitError):
    """A file that cannot be read as a trace of the expected format."""

    exit_code = 3


class UnsupportedFormatError(TraceFormatError):
    """A file of a known format that tracekit cannot read (e.g. a raw ``.nsys-rep``)."""


class EmptyTraceError(TraceFormatError):
    """A trace (or directory) that holds no usable events."""


class NotATraceError(TraceFormatError):
    """A file of a trace-like format (JSON) that is no trace at all, e.g. a JSON array of settings.
    Ingesting a folder skips and lists such files instead of failing."""


class DatasetError(TracekitError):
    """An ingested Parquet dataset that is missing, incomplete or inconsistent."""

    exit_code = 4


class AnalysisError(TracekitError):
    """An analysis that cannot produce a result from the given tables."""

    exit_code = 5


class MissingDependencyError(TracekitError):
    """An optional dependency is needed; the message says what to install."""

    exit_code = 6


class GateRegression(TracekitError):
    """``tracekit diff --gate``: a phase of B is slower than A's by more than the gate, beyond noise."""

    exit_code = 1


class NotComparableError(TracekitError):
    """``tracekit diff --gate``: the two runs differ in a feature (prefix caching, CUDA graphs, …)
    that makes their phases not comparable (docs/ci.md)."""

    exit_code = 7


def debug() -> bool:
    """``TRACEKIT_DEBUG`` set to a true value: an unexpected exception passes with its traceback."""
    return os.environ.get("TRACEKIT_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


def one_line(exc: BaseException) -> str:
    """An unexpected exception in one line: its type and the first line of its message (200 chars)."""
    text = str(exc).strip().splitlines()
    msg = text[0][:200] if text else ""
    return f"{type(exc).__name__}{': ' + msg if msg else ''}"
