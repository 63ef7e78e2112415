"""One self-contained HTML file: inline CSS, plots as base64 PNG, no scripts, no network.

Readable at 1,280 px: the verdict and reason columns come right after the name (class
``verdict`` / ``reason``; a test checks them in a headless-Chromium screenshot), shortened kernel
names carry the full name on hover (``title``), and the regions table shows the
:data:`MAX_REGIONS` regions with the most device time unless told otherwise, then says how many
were left out. At 1,400 px no table hides a column: every cell but a name wraps at its spaces
(a unit goes under its number) and the page takes up to 1,360 px (a browser test measures every
table of real reports).

Every string from a trace is HTML-escaped; a Content-Security-Policy that forbids scripts and
remote loads is defence in depth, not the escaping itself (tests check both).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from tracekit.report import fmt
from tracekit.report.plots import draw as plotmod
from tracekit.report.plots.figures import Plot
from tracekit.report.fmt import html_escape as esc
from tracekit.report.model import ReportData
from tracekit.report.sections.blocks import Section, Table
from tracekit.report.sections.registry import SECTIONS, Entry, report_sections

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1360px;
color:#222;padding:0 1em}
h1{font-size:1.5em;word-break:break-all}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.8em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}
td.wrap{min-width:9em;max-width:40em;overflow-wrap:anywhere}
td.name{min-width:10em;max-width:24em;overflow-wrap:anywhere}
td.short{text-decoration:underline dotted #999;cursor:help}
td.reason{min-width:10em;max-width:28em}td.verdict{font-weight:600}
td.v-compute{color:#0b5394}td.v-bandwidth{color:#9c4a00}td.v-overhead{color:#666}td.v-queued{color:#6a3d9a}
td.v-unknown{color:#999}
.leftout{color:#555;font-size:.9em}
.diag{background:#fff3cd;border:1px solid #e0c060;padding:.6em}.note{color:#8a5a00}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
details{margin:.3em 0}summary{cursor:pointer;color:#0550ae}
"""


WRAP = {"phase rule", "value"}
MAX_REGIONS = 2_000  # default rows of the regions table (the rest: --regions all, or the JSON report)
_CLASS = {"name": "name", "verdict": "verdict", "reason": "reason"}


def _cell(t: Table, i: int, r: int, c: str) -> str:
    cls = ["wrap"] if t.headers[i] in WRAP else ([_CLASS[t.headers[i]]] if t.headers[i] in _CLASS else [])
    if t.headers[i] == "verdict":
        cls.append(f"v-{c}" if c in ("compute", "bandwidth", "overhead", "queued", "unknown") else "")
    full = t.full.get(i)
    title = ""
    if full is not None and full[r] is not None:
        cls.append("short")
        title = f' title="{esc(full[r])}"'
    attr = f' class="{" ".join(x for x in cls if x)}"' if any(cls) else ""
    return f"<td{attr}{title}>{esc(c)}</td>"


def _table(t: Table, tid: str = "", max_rows: int | None = None) -> str:
    if not t.headers:
        return ""
    attr = f' id="{esc(tid)}"' if tid else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in t.headers)
    n = len(t.rows) if max_rows is None or not t.cappable else min(max_rows, len(t.rows))
    body = "".join(
        "<tr>" + "".join(_cell(t, i, r, c) for i, c in enumerate(row)) + "</tr>" for r, row in enumerate(t.rows[:n])
    )
    html = f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if n < len(t.rows):
        left = len(t.rows) - n
        empty = min(t.zero_rows, left)
        html += (
            f'<p class="leftout">Showing the {fmt.count(n, "region")} with the most device time; {fmt.count(left)} '
            f"of {fmt.count(len(t.rows))} left out"
            + (f" ({'all' if empty == left else fmt.count(empty)} of them with no device work)" if empty else "")
            + ". <code>tracekit report TRACE --format html --regions all</code> "
            "(or <code>--format json</code>) has every region.</p>"
        )
    if t.collapsed and n == len(t.rows):
        cap = f"{t.caption} ({fmt.count(len(t.rows), 'row')})" if t.caption else fmt.count(len(t.rows), "row")
        return f"<details><summary>{esc(cap)}</summary>{html}</details>"
    return (f"<h3>{esc(t.caption)}</h3>" if t.caption else "") + html


def section_html(s: Section, max_rows: int | None = MAX_REGIONS) -> str:
    parts = [f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>']
    for p in s.paragraphs:
        cls = "diag" if p.startswith("CPU DIAGNOSTIC") else ("note" if p.startswith("Note:") else "")
        parts.append(f'<p class="{cls}">{esc(p)}</p>' if cls else f"<p>{esc(p)}</p>")
    for i, t in enumerate(s.tables):
        tid = "phase-table" if s.anchor == "phases" and i == 0 else ("region-table" if t.cappable else "")
        parts.append(_table(t, tid, max_rows))
    parts.append("</section>")
    return "\n".join(parts)


def plot_html(f: Plot) -> str:
    if f.figure is None:
        return f'<p class="note">{esc(f.title)}: not drawn — {esc(f.missing)}</p>'
    b64 = base64.b64encode(plotmod.to_bytes(f.figure, "png")).decode("ascii")
    return (
        f'<figure id="plot-{esc(f.kind)}"><img alt="{esc(f.title)}" src="data:image/png;base64,{b64}">'
        f"<figcaption>{esc(f.title)}</figcaption></figure>"
    )


def render(
    data: ReportData,
    figures: list[Plot] | None = None,
    max_regions: int | None = None,
    registry: Sequence[Entry] = SECTIONS,
) -> str:
    """The complete HTML document as text: the report's sections of ``registry``. ``max_regions``:
    rows of the regions table (None: :data:`MAX_REGIONS`; -1: all)."""
    rows = MAX_REGIONS if max_regions is None else (None if max_regions < 0 else max_regions)
    return page(f"tracekit report: {data.title}", report_sections(data, registry), figures, rows)


def page(title: str, sections: list[Section], figures: list[Plot] | None, max_rows: int | None = MAX_REGIONS) -> str:
    """A self-contained HTML page: the title, the sections, then the plots."""
    body = [f"<h1>{esc(title)}</h1>", *(section_html(s, max_rows) for s in sections)]
    if figures:
        body.append('<section id="plots"><h2>Plots</h2>' + "\n".join(plot_html(f) for f in figures) + "</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
