"""GitHub-flavoured Markdown report: tables, long lists folded in ``<details>``, plots as PNG files.

Every cell and paragraph goes through :func:`tracekit.report.fmt.md_escape` (HTML-escaped and
Markdown punctuation / table pipes backslash-escaped), so names from a trace stay text.
"""

from __future__ import annotations

from pathlib import Path

from tracekit.report import plots as plotmod
from tracekit.report.figures import Plot
from tracekit.report.fmt import md_escape
from tracekit.report.model import ReportData
from tracekit.report.sections import Section, Table, build


def _table(t: Table) -> list[str]:
    if not t.headers:
        return []
    lines = ["| " + " | ".join(md_escape(h) for h in t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in t.rows]
    if t.collapsed:
        summary = md_escape(f"{t.caption} ({len(t.rows)} rows)" if t.caption else f"{len(t.rows)} rows")
        return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>"]
    return ([f"**{md_escape(t.caption)}**", ""] if t.caption else []) + lines


def _section(s: Section) -> list[str]:
    out = [f"## {md_escape(s.title)}", ""]
    for p in s.paragraphs:
        out += [md_escape(p), ""]
    for t in s.tables:
        out += [*_table(t), ""]
    return out


def render(data: ReportData, figures: list[Plot] | None = None, plot_dir: Path | None = None, plot_prefix: str = "") -> str:
    """The Markdown text. Drawn plots are written as PNG into ``plot_dir`` and linked as
    ``plot_prefix + <kind>.png``; without ``plot_dir`` the report says where plots would be."""
    lines = [f"# tracekit report: {md_escape(data.title)}", ""]
    for s in build(data):
        lines += _section(s)
    if figures:
        lines += ["## Plots", ""]
        for f in figures:
            if f.figure is None:
                lines += [f"- {md_escape(f.title)}: not drawn — {md_escape(f.missing)}"]
            elif plot_dir is not None:
                plot_dir.mkdir(parents=True, exist_ok=True)
                plotmod.save(f.figure, plot_dir / f"{f.kind}.png")
                lines += ["", f"![{md_escape(f.title)}]({plot_prefix}{f.kind}.png)", ""]
            else:
                lines += [f"- {md_escape(f.title)}: drawn but not embedded (write the report with --out to get the PNG files)"]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
