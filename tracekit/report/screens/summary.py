"""The ``tracekit summary`` screen: plain text from :func:`tracekit.analysis.trace_summary.summarize`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.numbers import count
from tracekit.report import fmt
from tracekit.report.names import cut_name


def _devices_text(devices: list[dict[str, Any]]) -> str:
    groups: dict[tuple[Any, Any], list[Any]] = {}
    for d in devices:
        groups.setdefault((d.get("name"), d.get("num_sms")), []).append(d.get("id"))
    parts = [
        (f"{len(ids)}× " if len(ids) > 1 else "")
        + f"{name or '?'} ({sms if sms is not None else '?'} SMs) [id {', '.join(str(i) for i in ids)}]"
        for (name, sms), ids in groups.items()
    ]
    return "; ".join(parts) or "none recorded"


def render_dataset(path: Path, rows: list[dict[str, Any]]) -> str:
    """A dataset of several traces: one line each (``tracekit summary DATASET``)."""
    lines = [f"dataset {path}: {count(len(rows), 'trace')} (choose one with --trace-id)"]
    lines += [
        f"  {r['trace_id']}  {r['format']}  {r['device_name'] or '-'}  "
        f"rank {r['rank'] if r['rank'] is not None else '-'}  "
        f"{count(r['kernels'], 'device activity', 'device activities')}"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def render_text(s: dict[str, Any], width: int = 100) -> str:
    """The summary as one screen of plain text."""
    out: list[str] = [f"trace {s['trace_id']}  ({s['format']}: {s['source']})"]
    if s["diagnostic"]:
        out.append(f"!! {s['diagnostic']}: no device activity in this trace")
    devs = _devices_text(s["devices"])
    used = sorted({d["device"] for d in s["devices_busy"]})
    if used:
        devs += f"; activity on device {', '.join(str(u) for u in used)}"
    out.append(f"devices   {devs}")
    dist = s["distributed"]
    if dist.get("world_size"):
        out.append(f"rank      {dist.get('rank')} of {dist.get('world_size')} ({dist.get('backend') or '?'})")
    t = s["time"]
    out.append(f"span      {fmt.value('span_ns', t['span_ns'])}  (first {t['first_ns']} ns, last {t['last_ns']} ns)")
    c = s["counts"]
    act = ", ".join(f"{fmt.count(v)} {k}" for k, v in c["device_activity"].items()) or "no device activity"
    out.append(
        f"events    {act}; {fmt.count(c['launches'], 'launch', 'launches')}, {fmt.count(c['ops'], 'cpu op')}, "
        f"{fmt.count(c['regions'], 'annotation')}"
        + (
            " (no device activity: `analyze` stands the cpu ops' self time in for kernels, so its kernel "
            "counts are cpu ops)"
            if not c["device_activity"] and c["ops"]
            else ""
        )
    )
    for d in s["devices_busy"]:
        out.append(
            f"device {d['device']}  busy {fmt.value('busy_ns', d['busy_ns'])} = "
            f"{fmt.value('busy_pct', d['busy_pct'] or 0)} of span "
            f"({fmt.count(d['count'], 'activity', 'activities')})"
        )
    if s["streams"]:
        out.append(
            "streams   "
            + "  ".join(
                f"{r['device']}/{r['stream']}: {fmt.value('busy_pct', r['busy_pct'] or 0)} ({fmt.count(r['count'])})"
                for r in s["streams"][:12]
            )
        )
    if s["top_kernels"]:
        out.append("top kernels by total time")
        for r in s["top_kernels"]:
            share, time = fmt.value("time_pct", r["pct"]), fmt.value("total_ns", r["total_ns"])
            out.append(f"  {share:>7}  {time:>10}  ×{fmt.count(r['count']):<6} {cut_name(str(r['name']), width - 40)}")
    ann = s["annotations"]
    if ann["distinct"]:
        out.append(f"annotations ({fmt.count(ann['distinct'])} distinct names)")
        for r in ann["top"]:
            out.append(f"  ×{fmt.count(r['count']):<6} {r['kind']:<20} {cut_name(str(r['name']), width - 32)}")
    else:
        out.append("annotations none")
    p = s["parse"]
    dropped = sum(p["dropped"].values())
    out.append(
        f"parse     {fmt.count(p['events_read'], 'event')} read, {fmt.count(p['events_kept'])} kept, "
        f"{fmt.count(p['skipped'])} not modelled, {fmt.count(dropped)} dropped"
    )
    for reason, n in sorted(p["dropped"].items(), key=lambda kv: -kv[1])[:6]:
        out.append(f"  dropped {fmt.count(n)}: {reason}")
    for w in p["warnings"][:6]:
        out.append(f"  warning: {cut_name(str(w), width - 11)}")
    return "\n".join(out)
