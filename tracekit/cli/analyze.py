"""``tracekit analyze``: per-region and per-phase verdicts with the numbers that decided them.

Thin: parse options, load, call :func:`tracekit.analysis.analyze`, render. Text rendering lives
here (table / markdown); JSON is ``AnalysisResult.to_json()`` (docs/json.md).
"""

from __future__ import annotations

import json
from typing import Any

import click

from tracekit.labels.phases import parse_phase_map

@click.command("analyze")
@click.argument("source", type=click.Path(exists=True, dir_okay=True))
@click.option("--hardware", "hardware", default=None, metavar="NAME|FILE",
              help="Device peaks: a name from the hardware table or a hardware file (tracekit calibrate).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True)
@click.option("--phase-map", "phase_map", multiple=True, metavar="REGEX=PHASE",
              help="Extra phase rule for region names (repeatable); PHASE is prefill, decode, mixed or other.")
@click.option("--slo", default=None, metavar="ttft=MS,tpot=MS", help="Objectives for goodput (ttft, tpot, e2el in ms).")
@click.option("--thresholds", default=None, metavar="busy=0.5,coverage=0.5", help="Override classification thresholds.")
@click.option("--trace-id", default=None, help="Which trace of a dataset holding several.")
@click.option("--limit", default=40, show_default=True, help="Regions shown in table/markdown output (JSON has all).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None, help="Write here, not stdout.")
def analyze(source: str, hardware: str | None, fmt: str, phase_map: tuple[str, ...], slo: str | None,
            thresholds: str | None, trace_id: str | None, limit: int, output: str | None) -> None:
    """Analyse a trace file or an ingested dataset: each region's and phase's device span, busy
    time, gaps, FLOPs, bytes and verdict (compute / bandwidth / overhead / unknown) with its reason;
    TTFT / TPOT / ITL when the trace has prefill and decode phases."""
    import tracekit
    from tracekit.analysis import Slo, Thresholds
    from tracekit.analysis import analyze as run_analysis

    pm = parse_phase_map(phase_map) or None  # checked before any work: one-line UsageError
    slo_v = Slo.parse(slo)
    th = Thresholds.parse(thresholds)
    trace = tracekit.load(source, trace_id=trace_id)
    result = run_analysis(trace, hardware=hardware, phase_map=pm, slo=slo_v, thresholds=th)
    doc = result.to_json()
    if fmt == "json":
        text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    else:
        text = render(doc, markdown=fmt == "markdown", limit=limit)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        click.echo(text, nl=False)


# --- text rendering ---------------------------------------------------------------------------------


def _dur(ns: Any) -> str:
    if ns is None:
        return "-"
    x = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} ns"


def _si(x: Any, unit: str) -> str:
    if x is None:
        return "-"
    v = float(x)
    for p, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.0f} %"


def _num(x: Any) -> str:
    return "-" if x is None else f"{float(x):.3g}"


def _table(headers: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        esc = [[c.replace("|", "\\|") for c in r] for r in rows]
        return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers), *["| " + " | ".join(r) + " |" for r in esc]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(headers), line(["-" * w for w in widths]), *[line(r) for r in rows]]


def _metric_row(r: dict[str, Any]) -> list[str]:
    return [_dur(r.get("span_ns")), _pct(r.get("busy_ratio")), str(r.get("gap_count", "-")), str(r.get("kernel_count", "-")),
            _si(r.get("flops"), "FLOP"), _si(r.get("bytes"), "B"), _num(r.get("intensity")),
            _si(r.get("achieved_flops_per_s"), "FLOP/s"), _si(r.get("achieved_bytes_per_s"), "B/s"),
            _pct(r.get("coverage")), str(r.get("bound") or "-"), str(r.get("reason") or "")]


METRIC_HEADERS = ["span", "busy", "gaps", "kernels", "FLOPs", "bytes", "FLOP/B", "FLOP/s", "B/s", "cov", "bound", "reason"]


def render(doc: dict[str, Any], markdown: bool = False, limit: int = 40) -> str:
    """The analysis JSON document as a plain-text table or Markdown."""
    h = (lambda t: f"## {t}") if markdown else (lambda t: f"{t}\n{'=' * len(t)}")
    out: list[str] = []
    tr, dev, tot = doc["trace"], doc["device"], doc["totals"]
    out.append(("# " if markdown else "") + f"tracekit analyze: {tr.get('source') or tr.get('id')}")
    out.append(f"format {tr.get('format')}, rank {tr.get('rank')}, trace id {tr.get('id')}")
    if doc.get("diagnostic"):
        out.append(f"**{doc['diagnostic']}**" if markdown else f"*** {doc['diagnostic']} ***")
    if dev.get("hardware"):
        ridges = ", ".join(f"{k} {v:.0f} FLOP/B" for k, v in (dev.get("ridge") or {}).items())
        out.append(f"device {dev.get('name')}: peaks of {dev['hardware']} ({dev.get('peaks_source')}); "
                   f"bandwidth {_si(dev.get('peak_bytes_per_s'), 'B/s')}; ridge {ridges}")
    else:
        out.append(f"device {dev.get('name')}: {dev.get('hint')}")
    t = tot.get("trace") or {}
    out += ["", h("Whole trace"), *_table(METRIC_HEADERS, [_metric_row(t)], markdown)]
    if doc["phases"]:
        rows = [[p["phase"], str(p.get("region_count")), *_metric_row(p)] for p in doc["phases"]]
        out += ["", h("Phases"), *_table(["phase", "steps", *METRIC_HEADERS], rows, markdown)]
    lat_rows = []
    for p in doc["phases"]:
        for metric, v in (p.get("latency") or {}).items():
            lat_rows.append([p["phase"], metric, str(v.get("source")), str(v.get("count")),
                             *[_num(v.get(k)) for k in ("mean", "p50", "p90", "p99")]])
    if lat_rows:
        out += ["", h("Latency (ms)"), *_table(["phase", "metric", "source", "n", "mean", "p50", "p90", "p99"], lat_rows, markdown)]
        extra = [f"output tokens/s {_num(tot.get('output_tokens_per_s'))} ({tot.get('output_tokens')} tokens)"]
        if tot.get("slo"):
            extra.append(f"goodput {_num(tot.get('goodput_req_per_s'))} req/s, {_pct(tot.get('goodput_fraction'))} "
                         f"of requests meet {tot['slo']}")
        out.append("; ".join(extra))
        byctx = next((p.get("step_time_by_ctx") for p in doc["phases"] if p["phase"] == "decode"), None)
        if byctx:
            rows = [[f"{b['ctx_lo']}–{b['ctx_hi']}", str(b["steps"]), _num(b["mean_ms"]), _num(b["p50_ms"]), _num(b["p90_ms"])]
                    for b in byctx]
            out += ["", h("Decode step time by context length (ms)"),
                    *_table(["ctx", "steps", "mean", "p50", "p90"], rows, markdown)]
    regions = doc["regions"]
    rows = [[str(r.get("name"))[:48], str(r.get("phase")), "-" if r.get("step") is None else str(r["step"]), *_metric_row(r)]
            for r in regions[:limit]]
    out += ["", h(f"Regions ({len(regions)})"), *_table(["region", "phase", "step", *METRIC_HEADERS], rows, markdown)]
    if len(regions) > limit:
        out.append(f"… {len(regions) - limit} more regions (--limit N, or --format json for all)")
    un = doc["unattributed"]
    out += ["", h("Attribution")]
    out.append(f"device time {_dur(tot.get('device_time_ns'))} = attributed {_dur(tot.get('attributed_ns'))} + "
               f"unattributed {_dur(un['time_ns'])} ({un['count']} activities) — conserved: {tot.get('conserved')}")
    for r in un["by_reason"]:
        out.append(f"- {r['reason']}: {r['count']} activities, {_dur(r['time_ns'])}")
    if tot.get("regions_excluded"):
        out.append(f"{tot['regions_excluded']} regions with zero span and no device work excluded")
    for w in tot.get("warnings") or []:
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"
