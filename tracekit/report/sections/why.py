"""Why a verdict: idle time by cause and the per-class roofline, as plain rows of formatted
strings from the analysis JSON document (docs/json.md): one section, shown by ``tracekit analyze``
and by the report; each renderer escapes and lays it out itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt
from tracekit.report.names import cut_name
from tracekit.report.sections.blocks import LONG_LIST, Document, Section, Table

IDLE_HEADERS = ["scope", "idle", "#", "cause", "call", "op", "time", "share of idle", "count"]
CLASS_HEADERS = [
    "scope",
    "class",
    "time",
    "share",
    "FLOP/B",
    "dtype",
    "FLOP/s",
    "B/s",
    "% of roof",
    "bound",
    "underused",
]
CAUSE_LABEL = {
    "blocking": "(b) blocking call",
    "cold_start": "(f) cold start (blocking launch call)",
    "launch_latency": "(c) launch latency",
    "cpu_op": "(a) host in op",
    "outside_ops": "(d) host outside ops",
    "before_first_launch": "(e) before first launch",
    "after_last_kernel": "(e) after last kernel",
}


def _scopes(doc: Mapping[str, Any], regions: int) -> list[tuple[str, dict[str, Any]]]:
    """Phases, then the ``regions`` regions with most idle time."""
    out = [(f"phase {p['phase']}", p) for p in doc.get("phases") or []]
    regs = sorted(doc.get("regions") or [], key=lambda r: -(r.get("idle_ns") or 0))[:regions]
    return out + [(f"region {cut_name(str(r.get('name')), 40)}", r) for r in regs]


def idle_rows(doc: Mapping[str, Any], regions: int = 5, per_scope: int = 5) -> list[list[str]]:
    """Top idle culprits per phase and per region (the ``regions`` with most idle time)."""
    return [
        [
            scope,
            fmt.duration(d.get("idle_ns") or 0),
            str(c.get("rank")),
            CAUSE_LABEL.get(c["cause"], c["cause"]),
            str(c.get("call") or fmt.DASH),
            str(c.get("op") or fmt.DASH),
            fmt.duration(c["idle_ns"]),
            fmt.percent(c.get("share"), 0),
            fmt.count(c.get("count")),
        ]
        for scope, d in _scopes(doc, regions)
        for c in (d.get("idle_culprits") or [])[:per_scope]
    ]


def launch_delay_lines(doc: Mapping[str, Any]) -> list[str]:
    """Per phase, launch call → kernel start; where the analysis split each wait (issue 40), the
    part queued behind earlier work and the launch latency proper (stream free, device idle): a
    deep queue is not a slow launch path."""
    out = []
    for p in doc.get("phases") or []:
        if p.get("launch_delay_count"):
            split = ""
            if p.get("launch_queued_p50_ns") is not None and p.get("launch_latency_p50_ns") is not None:
                split = (
                    f" — queued behind earlier work {_spread(p, 'launch_queued')}; "
                    f"the device idle while a launch waited (launch latency) {_spread(p, 'launch_latency')}"
                )
            out.append(
                f"launch delay (launch call → kernel start), {p['phase']}: p50 "
                f"{fmt.duration(p['launch_delay_p50_ns'])}, p99 {fmt.duration(p['launch_delay_p99_ns'])} "
                f"over {fmt.count(p['launch_delay_count'], 'launch', 'launches')}{split}"
            )
    return out


def _spread(p: Mapping[str, Any], key: str) -> str:
    """``p50 …, p99 …, max …`` of a phase's ``{key}_{p50,p99,max}_ns``: the max shows a graph
    replay's one slow start that the per-kernel percentiles hide."""
    return ", ".join(f"{q} {fmt.duration(p[f'{key}_{q}_ns'])}" for q in ("p50", "p99", "max"))


def class_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """The per-class roofline of each phase and of the whole trace."""
    scopes = [(f"phase {p['phase']}", p.get("class_roofline") or []) for p in doc.get("phases") or []]
    scopes.append(("whole trace", (doc.get("totals") or {}).get("class_roofline") or []))
    return [
        [
            scope,
            str(c["op_class"]) + (" (estimated)" if c.get("estimated") else ""),
            fmt.duration(c.get("device_time_ns") or 0),
            fmt.percent(c.get("share"), 0),
            fmt.DASH if c.get("intensity") is None else fmt.plain(c["intensity"]),
            str(c.get("dtype") or fmt.DASH),
            fmt.DASH if c.get("achieved_flops_per_s") is None else fmt.si(c["achieved_flops_per_s"], "FLOP/s"),
            fmt.DASH if c.get("achieved_bytes_per_s") is None else fmt.si(c["achieved_bytes_per_s"], "B/s"),
            fmt.DASH if c.get("frac_roof") is None else fmt.roof_percent(float(c["frac_roof"]), 0),
            str(c.get("bound") or fmt.DASH),
            f"yes: {c.get('underused_cause')}" if c.get("underused") else "",
        ]
        for scope, cls in scopes
        for c in cls
    ]


def why(d: Document) -> Section:
    """Idle time by cause (top culprits per phase and per region with most idle), the launch
    delays, and the per-class roofline."""
    s = Section("Why: idle time by cause, per-class roofline", launch_delay_lines(d.doc), anchor="why")
    for headers, rows, caption in (
        (IDLE_HEADERS, idle_rows(d.doc), "idle time by cause: top culprits per phase and per region with most idle"),
        (
            CLASS_HEADERS,
            class_rows(d.doc),
            "per-class roofline: % of the attainable roof at the class's own intensity and dtype",
        ),
    ):
        if rows:
            s.tables.append(Table(headers, rows, caption, collapsed=len(rows) > 2 * LONG_LIST))
    return s
