"""One self-contained HTML file: inline CSS, plots as base64 PNG, no scripts, no network.

Every string from a trace is HTML-escaped; a Content-Security-Policy that forbids scripts and
remote loads is defence in depth, not the escaping itself (tests check both).
"""

from __future__ import annotations

import base64

from tracekit.report import plots as plotmod
from tracekit.report.figures import Plot
from tracekit.report.fmt import html_escape as esc
from tracekit.report.model import ReportData
from tracekit.report.sections import Section, Table, build

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.5em;word-break:break-all}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}
td{white-space:nowrap}td.wrap{white-space:normal;min-width:14em;max-width:40em;overflow-wrap:anywhere}
.diag{background:#fff3cd;border:1px solid #e0c060;padding:.6em}.note{color:#8a5a00}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
details{margin:.3em 0}summary{cursor:pointer;color:#0550ae}
"""


WRAP = {"name", "reason", "phase rule", "value", "reason"}


def _table(t: Table, tid: str = "") -> str:
    if not t.headers:
        return ""
    attr = f' id="{esc(tid)}"' if tid else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in t.headers)
    cls = ['<td class="wrap">' if h in WRAP else "<td>" for h in t.headers]
    body = "".join("<tr>" + "".join(f"{cls[i]}{esc(c)}</td>" for i, c in enumerate(row)) + "</tr>" for row in t.rows)
    html = f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if t.collapsed:
        cap = f"{t.caption} ({len(t.rows)} rows)" if t.caption else f"{len(t.rows)} rows"
        return f"<details><summary>{esc(cap)}</summary>{html}</details>"
    return (f"<h3>{esc(t.caption)}</h3>" if t.caption else "") + html


def _section(s: Section) -> str:
    parts = [f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>']
    for p in s.paragraphs:
        cls = "diag" if p.startswith("CPU DIAGNOSTIC") else ("note" if p.startswith("Note:") else "")
        parts.append(f'<p class="{cls}">{esc(p)}</p>' if cls else f"<p>{esc(p)}</p>")
    for i, t in enumerate(s.tables):
        tid = "phase-table" if s.anchor == "phases" and i == 0 else ""
        parts.append(_table(t, tid))
    parts.append("</section>")
    return "\n".join(parts)


def _plot(f: Plot) -> str:
    if f.figure is None:
        return f'<p class="note">{esc(f.title)}: not drawn — {esc(f.missing)}</p>'
    b64 = base64.b64encode(plotmod.to_bytes(f.figure, "png")).decode("ascii")
    return (f'<figure id="plot-{esc(f.kind)}"><img alt="{esc(f.title)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{esc(f.title)}</figcaption></figure>")


def render(data: ReportData, figures: list[Plot] | None = None) -> str:
    """The complete HTML document as text."""
    body = [f"<h1>tracekit report: {esc(data.title)}</h1>"]
    body += [_section(s) for s in build(data)]
    if figures:
        body.append('<section id="plots"><h2>Plots</h2>' + "\n".join(_plot(f) for f in figures) + "</section>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tracekit report: {esc(data.title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
