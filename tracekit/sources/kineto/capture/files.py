"""Finding and reading the capture traces of a trace: the ``capture_traces/`` folder beside it,
its ``execution_details.json`` (file list, batch sizes), and the kernel names a capture trace's
launch calls carry (a light second pass: the canonical tables keep no launch arguments).

Used by the graph-capture merge (:mod:`tracekit.sources.kineto.capture.merge`, which states the rule).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Final

import msgspec
import polars as pl

from tracekit.errors import TracekitError, TraceFormatError
from tracekit.inputs import DETAILS_MAX_BYTES, read_json
from tracekit.sources.kineto.reading.events import decode_fallback
from tracekit.sources.kineto.reading.jsonstream import stream_document
from tracekit.sources.kineto.reading.window import StreamStats

CAPTURE_DIR: Final = "capture_traces"
DETAILS_FILE: Final = "execution_details.json"
MAX_KEY: Final = (1 << 31) - 1  # the largest graph key (batch size, token count) read


class _Args(msgspec.Struct):
    kernel: Any = None
    correlation: Any = None


class _Ev(msgspec.Struct):
    cat: Any = None
    args: _Args | None = None


_BATCH = msgspec.json.Decoder(list[_Ev])
_ONE = msgspec.json.Decoder(_Ev)


def kernel_names(path: Path) -> pl.DataFrame:
    """(correlation, kernel) of every runtime/driver call that names its kernel (ROCm traces do,
    CUDA traces do not). A second, light pass over the file: the canonical tables keep no
    launch arguments. Streamed as the trace is (window by window, gzip inflated as it goes): a
    capture padded to 1.5 GB was read and inflated whole (3 GB)."""
    rows: list[tuple[int, str]] = []
    dropped: Counter[str] = Counter()

    def decode(piece: bytes) -> list[Any]:
        try:
            evs: list[Any] = _BATCH.decode(piece)
            return evs
        except (msgspec.ValidationError, RecursionError):
            return decode_fallback(piece, _ONE, dropped)

    def on_events(evs: list[Any]) -> None:
        rows.extend(
            (e.args.correlation, e.args.kernel)
            for e in evs
            if e is not None
            and e.cat in ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
            and e.args is not None
            and isinstance(e.args.kernel, str)
            and isinstance(e.args.correlation, int)
        )

    stats = StreamStats()
    stream_document(path, decode, on_events, stats)
    if stats.gzip_truncated or stats.truncated_bytes or stats.unclosed:  # cut short: left out by the merge, named
        raise TraceFormatError(f"{path}: the capture is cut short (its end is missing)")
    return pl.DataFrame(rows, schema={"correlation": pl.Int64(), "kernel": pl.String()}, orient="row")


def discover(trace_path: str | os.PathLike[str]) -> list[Path]:
    """Capture traces beside a trace file: ``<dir>/capture_traces/`` (the files its
    ``execution_details.json`` lists, else every ``*.json``/``*.json.gz`` there). Only files of
    the folder itself: an entry naming another folder (``../../x``, an absolute path, a link out)
    is left out (:func:`problems` says so)."""
    d = Path(trace_path).parent / CAPTURE_DIR
    if not d.is_dir():
        return []
    listed = [d / str(e["file"]) for e in details(d) if isinstance(e.get("file"), str)]
    found = [p for p in listed if p.is_file()]
    if found:
        return found
    return sorted(
        p
        for p in d.iterdir()
        if p.is_file() and p.name.endswith((".json", ".json.gz")) and p.name != DETAILS_FILE and _inside(d, p.name)
    )


def _inside(d: Path, name: str) -> bool:
    """``name`` is a file of the folder ``d`` itself: a plain name (no separator, not ``..``) that
    does not resolve (through a link) to somewhere else."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        return False
    try:
        return (d / name).resolve().parent == d.resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def _read_details(d: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The entries of ``<d>/execution_details.json`` confined to ``d``, and what was left out."""
    f = d / DETAILS_FILE
    if not os.path.lexists(f):
        return [], []
    try:
        data = read_json(f, DETAILS_FILE, TraceFormatError, DETAILS_MAX_BYTES)
    except TracekitError as exc:
        return [], [f"capture: {exc}; left out (capture files found by name instead)"]
    if not isinstance(data, list):
        return [], [f"capture: {f} is not a JSON array; left out (capture files found by name instead)"]
    entries = [e for e in data if isinstance(e, dict)]
    outside = [e["file"] for e in entries if isinstance(e.get("file"), str) and not _inside(d, e["file"])]
    if not outside:
        return entries, []
    kept = [e for e in entries if not (isinstance(e.get("file"), str) and not _inside(d, e["file"]))]
    first = outside[0] if len(outside[0]) <= 80 else outside[0][:77] + "..."
    n = len(outside)
    return kept, [
        f"capture: {n} {f} entr{'y' if n == 1 else 'ies'} naming a file outside {d} left out (e.g. {first!r})"
    ]


def details(d: Path) -> list[dict[str, Any]]:
    """The entries of ``<d>/execution_details.json`` (empty when missing or unreadable), those
    naming a file outside ``d`` left out."""
    return _read_details(d)[0]


def problems(d: Path) -> list[str]:
    """Warnings about ``<d>/execution_details.json``: unreadable, or entries naming files outside."""
    return _read_details(d)[1]


def batch_of_file(path: Path, listed_only: bool = False) -> int | None:
    """Graph key of a capture file: its ``execution_details.json`` ``batch_size`` (vLLM: the
    padded token count the graph was captured for; SGLang: the batch size), else (unless
    ``listed_only``) a ``bs_<n>`` file name (SGLang's ``bs_{n}_rank{r}.json.gz``). Only a key in
    [0, 2^31) counts (ASCII digits in a name); any other is as if absent."""
    for e in details(path.parent):
        bs = e.get("batch_size")
        if e.get("file") == path.name and isinstance(bs, int) and not isinstance(bs, bool) and 0 <= bs <= MAX_KEY:
            return int(bs)
    m = re.search(r"(?:^|[_-])bs[_-]?([0-9]{1,9})(?![0-9])", path.name, re.ASCII)
    return int(m.group(1)) if m and not listed_only else None


def mode_of_file(path: Path) -> str | None:
    """``mode`` of a capture file's ``execution_details.json`` entry (``FULL`` or ``PIECEWISE``)."""
    for e in details(path.parent):
        if e.get("file") == path.name and isinstance(e.get("mode"), str):
            return str(e["mode"])[:64]
    return None
