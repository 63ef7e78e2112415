"""GitHub-flavoured Markdown report: tables, long lists folded in ``<details>``, plots as PNG files.

Sized for a bug report: GitHub caps an issue body at 65,536 characters, so by default the report
stays under :data:`MAX_CHARS` (60,000). Every section is kept; the regions table (ordered by device
time, see :func:`tracekit.report.sections.build.by_device_time`) shows as many of its first rows as fit,
followed by a line saying how many were left out and how to get all of them. Shortened kernel names
get their full form in a ``<details>`` list at the end (as much of it as fits).

Every cell and paragraph goes through :func:`tracekit.report.fmt.md_escape` (HTML-escaped and
Markdown punctuation / table pipes backslash-escaped), so names from a trace stay text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.report import fmt
from tracekit.report.fmt import md_escape
from tracekit.report.plots.canvas import save
from tracekit.report.sections.blocks import Section, Table
from tracekit.report.sections.registry import SECTIONS, Entry, report_sections

if TYPE_CHECKING:  # the analyze screen renders Markdown without polars or matplotlib
    from tracekit.report.model import ReportData
    from tracekit.report.plots.figures import Plot

MAX_CHARS = 60_000  # under GitHub's 65,536-character limit for an issue or comment body
FULL_NAME_CHARS = 2_000  # one full name in the details list is cut after this many characters
HOW_TO_GET_ALL = "`tracekit report TRACE --regions all` (or `--format json`) has every region"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(md_escape(c) for c in cells) + " |"


def table_block(t: Table, rows: list[list[str]] | None = None) -> list[str]:
    """The table's lines (``rows`` in place of its own when given; used by the diff renderer too)."""
    if not t.headers:
        return []
    body = t.rows if rows is None else rows
    lines = [_row(t.headers), "|" + "---|" * len(t.headers)] + [_row(r) for r in body]
    if t.collapsed:
        summary = md_escape(
            f"{t.caption} ({fmt.count(len(body), 'row')})" if t.caption else fmt.count(len(body), "row")
        )
        return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>"]
    return ([f"**{md_escape(t.caption)}**", ""] if t.caption else []) + lines


def _left_out(t: Table, shown: int) -> str:
    left = len(t.rows) - shown
    empty = min(t.zero_rows, left)
    why = f" ({'all' if empty == left else fmt.count(empty)} of them with no device work)" if empty else ""
    return (
        f"Showing the {fmt.count(shown, 'region')} with the most device time; {fmt.count(left)} of "
        f"{fmt.count(len(t.rows))} left out{why} to keep this report under {fmt.count(MAX_CHARS)} characters. "
        f"{HOW_TO_GET_ALL}."
    )


def section_lines(s: Section, cap_rows: dict[int, int]) -> list[str]:
    out = [f"## {md_escape(s.title)}", ""]
    for p in s.paragraphs:
        out += [md_escape(p), ""]
    for t in s.tables:
        n = cap_rows.get(id(t))
        if n is not None and n < len(t.rows):
            t2 = Table(t.headers, t.rows, t.caption, False)  # a capped table is shown open: its rows are the point
            out += [*table_block(t2, t.rows[:n]), "", _left_out(t, n), ""]
        else:
            out += [*table_block(t), ""]
    return out


def _full_names(sections: list[Section], cap_rows: dict[int, int], cappable: bool) -> list[tuple[str, str]]:
    """(short, full) pairs of every shortened name shown in the (non-)cappable tables, first
    occurrence first, deduplicated."""
    seen: dict[str, str] = {}
    for s in sections:
        for t in s.tables:
            if t.cappable != cappable:
                continue
            n = cap_rows.get(id(t), len(t.rows))
            for col, fulls in t.full.items():
                for row, full in zip(t.rows[:n], fulls[:n]):
                    if full is not None and full not in seen:
                        seen[full] = row[col]
    return [(short, full) for full, short in seen.items()]


NAMES_SHARE = 15_000  # at most this much of the budget goes to full kernel names before regions are added


def _full_name_lines(pairs: list[tuple[str, str]], budget: int, what: str = "shortened kernel name") -> list[str]:
    if not pairs:
        return []
    head = ["<details>", f"<summary>Full names of the {fmt.count(len(pairs), what)}</summary>", ""]
    tail = ["", "</details>", ""]
    used = sum(len(x) + 1 for x in head + tail) + 200
    items: list[str] = []
    for short, full in pairs:
        text = full if len(full) <= FULL_NAME_CHARS else full[:FULL_NAME_CHARS] + " … (cut)"
        line = f"- **{md_escape(short)}**: {md_escape(text)}"
        if used + len(line) + 1 > budget:
            break
        items.append(line)
        used += len(line) + 1
    if not items:
        return []
    more = len(pairs) - len(items)
    if more:
        items.append(f"- … {fmt.count(more, 'more full name')} left out for size; the HTML report shows each on hover")
    return head + items + tail


def plot_lines(figures: list[Plot], plot_dir: Path | None, plot_prefix: str) -> list[str]:
    lines = ["## Plots", ""]
    for f in figures:
        if f.figure is None:
            lines += [f"- {md_escape(f.title)}: not drawn — {md_escape(f.missing)}"]
        elif plot_dir is not None:
            plot_dir.mkdir(parents=True, exist_ok=True)
            save(f.figure, plot_dir / f"{f.kind}.png")
            lines += ["", f"![{md_escape(f.title)}]({plot_prefix}{f.kind}.png)", ""]
        else:
            lines += [
                f"- {md_escape(f.title)}: drawn but not embedded (write the report with --out to get the PNG files)"
            ]
    lines.append("")
    return lines


def _size(lines: list[str]) -> int:
    return sum(len(x) + 1 for x in lines)


def render(
    data: ReportData,
    figures: list[Plot] | None = None,
    plot_dir: Path | None = None,
    plot_prefix: str = "",
    max_regions: int | None = None,
    registry: Sequence[Entry] = SECTIONS,
) -> str:
    """The Markdown text. Drawn plots are written as PNG into ``plot_dir`` and linked as
    ``plot_prefix + <kind>.png``; without ``plot_dir`` the report says where plots would be.

    ``max_regions``: None sizes the regions table to keep the whole text under :data:`MAX_CHARS`;
    a number shows at most that many regions (``-1``: all of them, whatever the size). The
    sections are the report's of ``registry``."""
    secs = report_sections(data, registry)
    title = [f"# tracekit report: {md_escape(data.title)}", ""]
    plots = plot_lines(figures, plot_dir, plot_prefix) if figures else []
    cappable = [t for s in secs for t in s.tables if t.cappable]
    sized = max_regions is None
    # sized: no rows yet (the regions fill what the rest leaves below); else the rows asked for
    asked = 0 if max_regions is None else max_regions
    cap = {id(t): len(t.rows) if asked < 0 else min(asked, len(t.rows)) for t in cappable}
    # full names of the kernels in the fixed tables first (bounded), then regions fill the rest
    fixed = _size(title) + _size(plots) + _size([x for s in secs for x in section_lines(s, cap)])
    names = _full_name_lines(_full_names(secs, cap, False), min(NAMES_SHARE, MAX_CHARS - fixed) if sized else 1 << 62)
    if sized:
        room = MAX_CHARS - fixed - _size(names) - 600  # 600: the left-out line and a names summary
        for t in cappable:
            n, used = 0, 0
            for r in t.rows:
                w = len(_row(r)) + 1
                if used + w > room:
                    break
                used, n = used + w, n + 1
            cap[id(t)] = n
            room -= used
    lines = title + [x for s in secs for x in section_lines(s, cap)] + names
    budget = MAX_CHARS - _size(lines) - _size(plots) if sized else 1 << 62
    lines += _full_name_lines(_full_names(secs, cap, True), budget, "cut region name")
    lines += plots
    return "\n".join(lines).rstrip() + "\n"


def render_document(title: str, lead: list[str], sections: list[Section], diagnostic: str | None = None) -> str:
    """A titled document of sections as GitHub Markdown (the ``analyze`` screen): the title, the
    CPU-diagnostic label in bold, the lead lines, then each section as the report renders it
    (paragraphs, then tables, each block followed by a blank line, so no line of text is ever
    read as a table row)."""
    lines = [f"# {md_escape(title)}", ""]
    if diagnostic:
        lines += [f"**{md_escape(diagnostic)}**", ""]
    for p in lead:
        lines += [md_escape(p), ""]
    for s in sections:
        lines += section_lines(s, {})
    return "\n".join(lines).rstrip() + "\n"
