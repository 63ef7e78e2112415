"""Write a Kineto trace back with each analysed region's phase, verdict and reason added.

Two additions, both valid Chrome trace JSON (Perfetto UI and chrome://tracing open the file):

1. args on the original ``user_annotation`` events: ``tk_phase``, ``tk_phase_rule``, ``tk_step``,
   ``tk_bound``, ``tk_reason`` (the event itself is otherwise untouched);
2. new named tracks: a process "tracekit phases" with one thread per phase, holding one complete
   event per labelled region over its analysed span (the device span for GPU traces), named
   ``<phase>: <bound>`` with the numbers in args. These events use the category ``tracekit``,
   which tracekit's loader does not model, so loading the labelled trace gives back exactly the
   original tables (tests check it).

This module is a Kineto *writer*: it is the one place outside the loader that names raw Chrome
trace fields (``ph``, ``ts``, ``dur``, ``args``…), because it has to write them.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.errors import TraceFormatError, UsageError

CATEGORY = "tracekit"
ANNOTATION_CATS = ("user_annotation", "User")
LABEL_ARGS = ("phase", "phase_rule", "step", "bound", "reason")
PHASE_TIDS = {"prefill": 1, "decode": 2, "mixed": 3, "other": 4}


@dataclass(frozen=True)
class LabelStats:
    labelled: int  # original annotation events that got args
    unmatched: int  # analysed regions whose original event was not found
    track_events: int  # events added on the new tracks


def read_raw(path: str | Path) -> dict[str, Any]:
    """The trace as a JSON object (gzip by magic bytes). Raises TraceFormatError."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{p}: label needs the original Kineto JSON trace, not a dataset directory")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise TraceFormatError(f"{p}: truncated or corrupt gzip ({exc})") from None
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{p}: not valid JSON ({exc})") from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(f"{p}: not a Kineto/Chrome trace (no traceEvents list)")
    return doc


def ts_to_ns(ts: Any, base: int) -> int | None:
    """Same rule as the loader: exact decimal µs → ns (first three fraction digits), plus base."""
    if isinstance(ts, bool) or ts is None:
        return None
    if isinstance(ts, int):
        return ts * 1000 + base
    if isinstance(ts, float):
        text = repr(ts)
        if "e" in text or "E" in text:
            return round(ts * 1000) + base
    elif isinstance(ts, str):
        text = ts.strip()
    else:
        return None
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    try:
        v = int(whole) * 1000 + int((frac[:3]).ljust(3, "0"))
    except ValueError:
        return None
    return (-v if neg else v) + base


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def label_doc(doc: dict[str, Any], labels: pl.DataFrame) -> LabelStats:
    """Add labels to ``doc`` in place. ``labels``: one row per analysed region with the CPU-side
    identity ``name, pid, tid, cpu_start_ns`` and ``phase, phase_rule, step, bound, reason,
    start_ns, end_ns`` (the analysed span)."""
    base = _int(doc.get("baseTimeNanoseconds")) or 0
    events: list[Any] = doc["traceEvents"]
    key_cols = ["name", "pid", "tid", "cpu_start_ns"]
    lab = labels.select(*key_cols, *[c for c in (*LABEL_ARGS, "start_ns", "end_ns") if c in labels.columns])
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in lab.iter_rows(named=True):
        by_key.setdefault((r["name"], r["pid"], r["tid"], r["cpu_start_ns"]), r)
    labelled = 0
    matched: set[tuple[Any, ...]] = set()
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X" or ev.get("cat") not in ANNOTATION_CATS:
            continue
        key = (ev.get("name"), _int(ev.get("pid")), _int(ev.get("tid")), ts_to_ns(ev.get("ts"), base))
        found = by_key.get(key)
        if found is None:
            continue
        r = found
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
            ev["args"] = args
        for k in LABEL_ARGS:
            if r.get(k) is not None:
                args[f"tk_{k}"] = r[k]
        labelled += 1
        matched.add(key)
    added = _tracks(events, lab, base)
    doc["tracekit_label"] = {"version": 1, "regions_labelled": labelled, "regions_unmatched": len(by_key) - len(matched)}
    return LabelStats(labelled, len(by_key) - len(matched), added)


def _free_pid(events: list[Any]) -> int:
    pids = [p for p in (_int(e.get("pid")) for e in events if isinstance(e, dict)) if p is not None]
    return max([0, *pids]) + 1000


def _tracks(events: list[Any], lab: pl.DataFrame, base: int) -> int:
    """Append the "tracekit phases" process: one thread per phase; overlapping regions of a phase
    go to extra lanes so every track stays properly nested."""
    if lab.height == 0 or "phase" not in lab.columns:
        return 0
    pid = _free_pid(events)
    new: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "tracekit phases"}},
                                 {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}}]
    spans = lab.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()).sort("start_ns")
    lane_end: dict[tuple[str, int], int] = {}
    named: set[int] = set()
    for r in spans.iter_rows(named=True):  # one row per region, not per event
        phase = str(r.get("phase") or "other")
        lane = 0
        while lane_end.get((phase, lane), -(1 << 62)) > r["start_ns"]:
            lane += 1
        lane_end[(phase, lane)] = r["end_ns"]
        tid = PHASE_TIDS.get(phase, 5) + 10 * lane
        if tid not in named:
            named.add(tid)
            title = f"phase: {phase}" + (f" (overlap {lane})" if lane else "")
            new.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": title}})
        args = {k: r[k] for k in LABEL_ARGS if r.get(k) is not None}
        args["region"] = r["name"]
        new.append({"ph": "X", "cat": CATEGORY, "name": f"{phase}: {r.get('bound') or 'unknown'}", "pid": pid, "tid": tid,
                    "ts": (r["start_ns"] - base) / 1000, "dur": (r["end_ns"] - r["start_ns"]) / 1000, "args": args})
    events.extend(new)
    return sum(1 for e in new if e["ph"] == "X")


def write(doc: dict[str, Any], out: Path) -> Path:
    """Write JSON (gzip when the name ends in .gz) atomically."""
    from tracekit.report.output import write_atomic

    data = msgspec.json.encode(doc)
    if out.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    return write_atomic(out, data)


def region_labels(trace_regions: pl.DataFrame, result_regions: pl.DataFrame) -> pl.DataFrame:
    """Join a result's regions (by ``region_id``) to the trace's regions table for their CPU identity."""
    ident = trace_regions.select("region_id", "name", "pid", "tid", pl.col("start_ns").alias("cpu_start_ns"))
    cols = [c for c in (*LABEL_ARGS, "start_ns", "end_ns") if c in result_regions.columns]
    return result_regions.select("region_id", *cols).join(ident, on="region_id", how="inner")
