"""Device memory over the phases (tracekit/analysis/memory/): the peak allocated with its time and
op, reserved against allocated, per phase the start, end, peak and growth, the KV cache against
the model, the headroom and the allocations never freed. Only for a trace with memory events."""

from __future__ import annotations

from typing import Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import Document, Section, Table


def _b(v: Any) -> str:
    return fmt.value("bytes", v)


def memory(d: Document) -> Section | None:
    """A few lines and the per-phase table; none without memory events."""
    m = (d.doc["totals"] or {}).get("memory")
    if not m:
        return None
    peak = m.get("peak") or {}
    counts = m.get("counts") or {}
    others = counts.get("other_devices") or {}
    left = ", ".join(f"{fmt.count(n, 'event')} of {k}" for k, n in others.items())
    lines = [
        f"{m['device']}: {fmt.count(counts.get('events'), 'memory event')} ({m.get('source')})"
        + (f"; not shown: {left}" if others else "")
    ]
    if peak:
        where = (
            ", ".join(x for x in (peak.get("op"), f"region {peak['region']}" if peak.get("region") else None) if x)
            or "no enclosing op"
        )
        lines.append(
            f"peak allocated {_b(peak['allocated_bytes'])} at {fmt.duration(peak['time_ns'] - peak['first_time_ns'])} "
            f"after the first memory event, in {where}"
            + (f", {peak['phase']}" if peak.get("phase") else "")
            + (f"; reserved at most {_b(peak['reserved_peak_bytes'])}" if peak.get("reserved_peak_bytes") else "")
            + "; allocated from "
            f"{_b(peak.get('allocated_first_bytes'))} to {_b(peak.get('allocated_last_bytes'))}"
        )
    kv = m.get("kv") or {}
    if kv.get("verdict"):
        lines.append(
            f"KV cache: {kv['verdict']}" + (f" (bytes per token: {kv['source']})" if kv.get("bytes_per_token") else "")
        )
    h = m.get("headroom") or {}
    if h.get("device_memory_bytes") is not None:
        tokens = f" = {fmt.count(h['headroom_tokens'], 'KV token')}" if h.get("headroom_tokens") is not None else ""
        lines.append(
            f"headroom: {_b(h.get('headroom_bytes'))}{tokens} of {_b(h['device_memory_bytes'])} "
            f"({h.get('source')}) above the peak reserved; "
            f"{_b(h.get('headroom_allocated_bytes'))} above the peak allocated"
        )
    elif h.get("why_none"):
        lines.append(f"headroom: not known ({h['why_none']})")
    nf = m.get("never_freed") or {}
    if nf.get("count"):
        lines.append(
            f"never freed within the trace: {fmt.count(nf['count'], 'allocation')}, {_b(nf['bytes'])} "
            f"({fmt.count(nf.get('ops'), 'op')})"
        )
    lines += list(m.get("notes") or [])
    tables = [_phase_table(m.get("phases") or [])] if m.get("phases") else []
    if nf.get("by_op"):
        rows = [[str(r["op"]), fmt.count(r["count"]), _b(r["bytes"]), _b(r["largest"])] for r in nf["by_op"]]
        tables.append(Table(["op", "allocations", "bytes", "largest"], rows, "allocations never freed, by op"))
    return Section("Memory", lines, tables, anchor="memory")


def _phase_table(phases: list[dict[str, Any]]) -> Table:
    rows = [
        [
            str(p["phase"]),
            fmt.count(p.get("steps")),
            _b(p.get("allocated_start_bytes")),
            _b(p.get("allocated_end_bytes")),
            _b(p.get("peak_allocated_bytes")),
            str(p.get("peak_op") or fmt.DASH),
            _b(p.get("reserved_peak_bytes")),
            _b(p.get("growth_per_step_bytes")),
            _b(p.get("growth_per_token_bytes")),
        ]
        for p in phases
    ]
    headers = ["phase", "steps", "start", "end", "peak", "op at peak", "reserved", "growth/step", "growth/token"]
    return Table(headers, rows, "device memory allocated per phase")
