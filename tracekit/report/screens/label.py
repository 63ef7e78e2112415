"""What ``tracekit label`` adds to a Kineto trace: the label decisions. The bytes are written by
:mod:`tracekit.sources.kineto.writer`, which patches the original file by event index.

Two additions, both valid Chrome trace JSON (Perfetto UI and chrome://tracing open the file):

1. args on each analysed region's own annotation event (found by ``regions.event_index``, the
   event's index in the file): ``tk_phase``, ``tk_phase_rule``, ``tk_step``, ``tk_bound``,
   ``tk_reason`` (and ``tk_diagnostic`` for a CPU-only trace); the event is otherwise untouched;
2. new named tracks: a process "tracekit phases" with one thread per phase, holding one complete
   event per labelled region over its analysed window (the host-clock window, docs/analysis.md), named
   ``<phase>: <bound>`` with the numbers in args. These events use the category ``tracekit``,
   which tracekit's loader does not model, so loading the labelled trace gives back exactly the
   original tables (tests check it on every shared Kineto trace).

The document also gets a first key ``tracekit_label``: ``{version, regions_labelled,
regions_unmatched, diagnostic}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from tracekit.sources.kineto import writer
from tracekit.tables.trace import Trace

CATEGORY = "tracekit"
LABEL_ARGS = ("phase", "phase_rule", "step", "bound", "reason")
PHASE_TIDS = {"prefill": 1, "decode": 2, "mixed": 3, "other": 4}


@dataclass(frozen=True)
class LabelStats:
    labelled: int  # original annotation events that got args
    unmatched: int  # analysed regions whose original event was not found
    track_events: int  # events added on the new tracks


def region_labels(trace_regions: pl.DataFrame, result_regions: pl.DataFrame) -> pl.DataFrame:
    """A result's regions (by ``region_id``) with their event's index in the file and their name."""
    ident = trace_regions.select("region_id", "event_index", "name")
    cols = [c for c in (*LABEL_ARGS, "start_ns", "end_ns") if c in result_regions.columns]
    return result_regions.select("region_id", *cols).join(ident, on="region_id", how="inner")


def label_bytes(
    data: bytes, trace: Trace, labels: pl.DataFrame, diagnostic: str | None, path: str = "trace"
) -> tuple[bytes, LabelStats]:
    """``data`` (the trace file's uncompressed bytes) with the labels of ``labels`` (see
    :func:`region_labels`) patched in."""
    extra = {"tk_diagnostic": diagnostic} if diagnostic else {}
    args: dict[int, dict[str, Any]] = {}
    for r in labels.filter(pl.col("event_index").is_not_null()).iter_rows(named=True):  # one row per region
        args[int(r["event_index"])] = {**{f"tk_{k}": r[k] for k in LABEL_ARGS if r.get(k) is not None}, **extra}
    base = int(trace.meta.get("time_base_ns") or 0)
    tracks = _tracks(labels, base, _free_pid(trace), diagnostic)
    p = writer.patch(data, args, tracks, path=path)
    unmatched = labels.height - p.patched
    p.add_top_key(
        "tracekit_label",
        {"version": 1, "regions_labelled": p.patched, "regions_unmatched": unmatched, "diagnostic": diagnostic},
    )
    return p.apply(), LabelStats(p.patched, unmatched, sum(1 for e in tracks if e["ph"] == "X"))


def _free_pid(trace: Trace) -> int:
    """A process id no event of the trace uses: 1000 above the largest one."""
    pids = [trace.table(t)["pid"].max() for t in ("ops", "launches", "regions")]
    pids.append(trace.kernels["device"].max())
    pids += [t.get("pid") for t in trace.meta.get("threads") or [] if isinstance(t, dict)]
    return max([0, *(p for p in pids if isinstance(p, int) and not isinstance(p, bool))]) + 1000


def _tracks(lab: pl.DataFrame, base: int, pid: int, diagnostic: str | None) -> list[dict[str, Any]]:
    """The "tracekit phases" process: one thread per phase; overlapping regions of a phase go to
    extra lanes so every track stays properly nested. Times are exact decimal µs."""
    if lab.height == 0 or "phase" not in lab.columns:
        return []
    title = "tracekit phases" + (f" ({diagnostic})" if diagnostic else "")
    new: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": title}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}},
    ]
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
            name = f"phase: {phase}" + (f" (overlap {lane})" if lane else "")
            new.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        args = {k: r[k] for k in LABEL_ARGS if r.get(k) is not None}
        args["region"] = r["name"]
        if diagnostic:
            args["diagnostic"] = diagnostic
        new.append(
            {
                "ph": "X",
                "cat": CATEGORY,
                "name": f"{phase}: {r.get('bound') or 'unknown'}",
                "pid": pid,
                "tid": tid,
                "ts": writer.us_text(r["start_ns"] - base),
                "dur": writer.us_text(r["end_ns"] - r["start_ns"]),
                "args": args,
            }
        )
    return new
