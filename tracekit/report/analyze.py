"""The ``tracekit analyze`` screens: the analysis JSON document (docs/json.md) as a plain-text
table or Markdown. Markdown cells and headings go through :func:`tracekit.report.fmt.md_escape`
(HTML-escaped), like every other Markdown this package writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tracekit.report import fmt
from tracekit.report.lowcov import DEFAULT_MIN_COVERAGE, MEASURED, low_coverage


if TYPE_CHECKING:  # the analysis package imports polars; the stored-result screen must not
    from tracekit.analysis.contract import AnalysisDoc


def _dur(ns: Any) -> str:
    return "-" if ns is None else fmt.duration(float(ns))


def _si(x: Any, unit: str) -> str:
    return x if isinstance(x, str) else "-" if x is None else fmt.si(float(x), unit)


def _pct(x: Any) -> str:
    return "-" if x is None else fmt.percent(float(x), 0)


def _num(x: Any) -> str:
    return x if isinstance(x, str) else "-" if x is None else fmt.plain(float(x))


def _int(x: Any) -> str:
    return "-" if x is None else fmt.count(x)


def _table(headers: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        esc = [[fmt.md_escape(c) for c in r] for r in rows]
        return [
            "| " + " | ".join(headers) + " |",
            "|" + "---|" * len(headers),
            *["| " + " | ".join(r) + " |" for r in esc],
        ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(headers), line(["-" * w for w in widths]), *[line(r) for r in rows]]


def _metric_row(r: Mapping[str, Any], min_cov: float = DEFAULT_MIN_COVERAGE) -> list[str]:
    if low_coverage(dict(r), min_cov):  # not a measurement: "–" next to the coverage
        r = {**r, **{k: "–" for k in MEASURED}}
    return [
        _dur(r.get("span_ns")),
        _pct(r.get("busy_ratio")),
        _int(r.get("gap_count")),
        _int(r.get("kernel_count")),
        _si(r.get("flops"), "FLOP"),
        _si(r.get("bytes"), "B"),
        _num(r.get("intensity")),
        _si(r.get("achieved_flops_per_s"), "FLOP/s"),
        _si(r.get("achieved_bytes_per_s"), "B/s"),
        _pct(r.get("coverage")),
        str(r.get("bound") or "-"),
        str(r.get("reason") or ""),
    ]


METRIC_HEADERS = [
    "span",
    "busy",
    "gaps",
    "kernels",
    "FLOPs",
    "bytes",
    "FLOP/B",
    "FLOP/s",
    "B/s",
    "cov",
    "bound",
    "reason",
]


def render(doc: AnalysisDoc, markdown: bool = False, limit: int = 40) -> str:
    """The analysis JSON document as a plain-text table or Markdown."""
    h = (lambda t: f"## {t}") if markdown else (lambda t: f"{t}\n{'=' * len(t)}")
    e = fmt.md_escape if markdown else str  # text from the trace: escaped in Markdown
    out: list[str] = []
    tr, dev, tot = doc["trace"], doc["device"], doc["totals"]
    out.append(("# " if markdown else "") + f"tracekit analyze: {e(tr.get('source') or tr.get('id'))}")
    out.append(f"format {e(tr.get('format'))}, rank {fmt.value('rank', tr.get('rank'))}, trace id {e(tr.get('id'))}")
    if doc.get("diagnostic"):
        out.append(f"**{doc['diagnostic']}**" if markdown else f"*** {doc['diagnostic']} ***")
    if dev.get("hardware"):
        ridges = ", ".join(f"{k} {fmt.value('ridge', v)}" for k, v in (dev.get("ridge") or {}).items())
        out.append(
            f"device {e(dev.get('name'))}: peaks of {e(dev['hardware'])} ({e(dev.get('peaks_source'))}); "
            f"bandwidth {_si(dev.get('peak_bytes_per_s'), 'B/s')}; ridge {ridges}"
        )
    else:
        out.append(f"device {e(dev.get('name'))}: {e(dev.get('hint'))}")
    t = tot.get("trace") or {}
    th = tot.get("thresholds")
    mc = float(th["min_coverage"]) if th else DEFAULT_MIN_COVERAGE
    out += ["", h("Whole trace"), *_table(METRIC_HEADERS, [_metric_row(t, mc)], markdown)]
    if doc["phases"]:
        rows = [[p["phase"], _int(p.get("region_count")), *_metric_row(p, mc)] for p in doc["phases"]]
        out += ["", h("Phases"), *_table(["phase", "steps", *METRIC_HEADERS], rows, markdown)]
    lat_rows = []
    for p in doc["phases"]:
        for metric, v in (p.get("latency") or {}).items():
            lat_rows.append(
                [
                    p["phase"],
                    metric,
                    str(v.get("source")),
                    _int(v.get("count")),
                    *[_num(v.get(k)) for k in ("mean", "p50", "p90", "p99")],
                ]
            )
    if lat_rows:
        out += [
            "",
            h("Latency (ms)"),
            *_table(["phase", "metric", "source", "n", "mean", "p50", "p90", "p99"], lat_rows, markdown),
        ]
        tokens = f"({fmt.count(tot.get('output_tokens'), 'token')})"
        if tot.get("serving_figures"):  # phases inferred from shapes: no serving figure (docs/serving.md)
            extra = [f"TTFT, TPOT, ITL, output tokens/s, goodput: {e(str(tot['serving_figures']))}"]
        elif tot.get("output_tokens") is not None:
            extra = [f"output tokens/s {_num(tot.get('output_tokens_per_s'))} {tokens}"]
        else:
            extra = ["output tokens/s: batch unknown"]
        if tot.get("slo") and not tot.get("serving_figures"):
            extra.append(
                f"goodput {_num(tot.get('goodput_req_per_s'))} req/s, {_pct(tot.get('goodput_fraction'))} "
                f"of requests meet {e(fmt.slo(tot['slo']) if isinstance(tot['slo'], dict) else tot['slo'])}"
            )
        out.append("; ".join(extra))
        byctx = next((p.get("step_time_by_ctx") for p in doc["phases"] if p["phase"] == "decode"), None)
        if byctx:
            rows = [
                [
                    fmt.value_range(b["ctx_lo"], b["ctx_hi"]),
                    _int(b["steps"]),
                    _num(b["mean_ms"]),
                    _num(b["p50_ms"]),
                    _num(b["p90_ms"]),
                ]
                for b in byctx
            ]
            out += [
                "",
                h("Decode step time by context length (ms)"),
                *_table(["ctx", "steps", "mean", "p50", "p90"], rows, markdown),
            ]
    from tracekit.report.serving import interference_sentence

    inter = interference_sentence(tot.get("serving"))
    if inter:
        out += ["", h("Serving"), e(inter)]
    out += _why(doc, h, e, markdown)
    # most device time first (the JSON keeps start order), so --limit keeps the regions that matter
    regions = sorted(doc["regions"], key=lambda r: -(r.get("device_time_ns") or r.get("busy_ns") or 0))
    rows = [
        [
            str(r.get("name"))[:48],
            str(r.get("phase")),
            "-" if r.get("step") is None else _int(r["step"]),
            *_metric_row(r, mc),
        ]
        for r in regions[:limit]
    ]
    out += [
        "",
        h(f"Regions ({fmt.count(len(regions))}, most device time first)"),
        *_table(["region", "phase", "step", *METRIC_HEADERS], rows, markdown),
    ]
    if len(regions) > limit:
        out.append(f"… {fmt.count(len(regions) - limit, 'more region')} (--limit N, or --format json for all)")
    comm = tot.get("communication") or []
    if comm:
        rows = [
            [c["phase"], _int(c["comm_count"]), _dur(c["comm_ns"]), _dur(c["exposed_ns"]), _pct(c["exposed_fraction"])]
            for c in comm
        ]
        out += [
            "",
            h("Communication (NCCL/RCCL kernels; exposed = no compute on the device meanwhile)"),
            *_table(["phase", "collectives", "time", "exposed", "exposed %"], rows, markdown),
        ]
    un = doc["unattributed"]
    out += ["", h("Attribution")]
    out.append(
        f"device time {_dur(tot.get('device_time_ns'))} = attributed {_dur(tot.get('attributed_ns'))} + "
        f"unattributed {_dur(un['time_ns'])} ({fmt.count(un['count'], 'activity', 'activities')}) — conserved: "
        f"{fmt.flag(tot.get('conserved'))}"
    )
    for r in un["by_reason"]:
        out.append(f"- {e(r['reason'])}: {fmt.count(r['count'], 'activity', 'activities')}, {_dur(r['time_ns'])}")
    if tot.get("regions_excluded"):
        out.append(f"{fmt.count(tot['regions_excluded'], 'region')} with zero span and no device work excluded")
    for w in tot.get("warnings") or []:
        out.append(f"warning: {e(w)}")
    if tr.get("format") == "nsys" and not t.get("flops"):
        from tracekit.report.headline import NSIGHT_SHAPES

        out.append(f"note: {e(NSIGHT_SHAPES)}")
    return "\n".join(out) + "\n"


def _why(doc: AnalysisDoc, h: Any, e: Any, markdown: bool) -> list[str]:
    """Idle time by cause and the per-class roofline (tracekit/report/why.py)."""
    from tracekit.report.why import CLASS_HEADERS, IDLE_HEADERS, class_rows, idle_rows, launch_delay_lines

    out: list[str] = []
    idle = idle_rows(doc)
    if idle:
        out += [
            "",
            h("Idle time by cause (top culprits per phase and per region with most idle)"),
            *_table(IDLE_HEADERS, idle, markdown),
            *[e(x) for x in launch_delay_lines(doc)],
        ]
    cls = class_rows(doc)
    if cls:
        out += [
            "",
            h("Per-class roofline (% of the attainable roof at the class's own intensity and dtype)"),
            *_table(CLASS_HEADERS, cls, markdown),
        ]
    return out
