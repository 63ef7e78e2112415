"""``tracekit diff --format md``: the comparison as a pull-request comment, verdict first.

Order: the gate's verdict in one line (with ``--gate``), the two runs, the phases that moved (the
gate's checks, else the per-phase figures that changed by 1 % or more), the operators that moved
most, both runs' features, then the full tables folded in ``<details>``. The whole stays under
:data:`MAX_CHARS` whatever the input: cells are cut to :data:`CELL_CHARS` characters, and a table
that does not fit in what is left shows its first rows and says how many were left out (tables
that no longer fit at all are named in the last line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.report import fmt
from tracekit.report.fmt import md_escape
from tracekit.report.formats.markdown import table_block
from tracekit.report.names import cut_name
from tracekit.report.sections.blocks import Table
from tracekit.report.sections.diff import diff_tables, gate_table, long_table, matched_table, moved_table
from tracekit.report.sections.features import features_pair_table

if TYPE_CHECKING:
    from tracekit.report.diff import Diff

MAX_CHARS = 60_000  # under GitHub's 65,536-character limit for a comment body
CELL_CHARS = 160
MOVED = 0.01  # a phase figure "moved" when it changed by at least 1 %


def _fit(t: Table, budget: int) -> list[str] | None:
    """The table's lines within ``budget`` characters: all rows, else as many first rows as fit
    and a line saying how many were left out (cells cut to :data:`CELL_CHARS`); None when not even
    its header fits."""
    headers, *rows = [[cut_name(c, CELL_CHARS) for c in r] for r in [t.headers, *t.rows]]
    n = len(rows)
    while True:
        lines = table_block(Table(headers, rows[:n], cut_name(t.caption, CELL_CHARS), t.collapsed))
        if n < len(rows):
            lines += [
                "",
                f"{fmt.count(len(rows) - n, 'more row')} left out to stay under {fmt.count(MAX_CHARS)} characters.",
            ]
        if len("\n".join(lines)) + 2 <= budget:
            return lines
        if n == 0:
            return None
        n = n // 2


def moved_phases(d: Diff) -> Table:
    """The gate's checks; without a gate, the per-phase figures that changed by :data:`MOVED` or more."""
    if d.gate is not None:
        return gate_table(d.gate)
    ph = d.phases
    if ph.height and "change" in ph.columns:
        ph = ph.filter(pl.col("change").abs() >= MOVED)
    return long_table(ph, "phase", f"per phase: figures that changed by {fmt.percent(MOVED, 0)} or more")


def render_md(d: Diff) -> str:
    """The Markdown comment (see the module docstring); always under :data:`MAX_CHARS` characters."""
    head: list[str] = []
    if d.gate is not None:
        head += [f"**{md_escape(d.gate.verdict()[:2_000])}**", ""]
    head += [
        "# tracekit diff",
        "",
        *(f"- {md_escape(line[:600])}" for line in d.side_lines()),
        "",
        *[f"**{md_escape(line)}**\n" for line in d.diagnostic_lines()],
    ]
    if d.gate is not None:
        head += [f"- {md_escape(n)}" for n in d.gate.notes] + [""]
    out = "\n".join(head)
    tables = [
        ("Phases that moved", moved_phases(d)),
        (
            "Operators that moved most",
            matched_table(d.matched) if d.matched.height else moved_table(d.ops, ""),
        ),
        (
            "Features",
            features_pair_table(d.features_a, d.features_b) if d.features_a or d.features_b else Table([], []),
        ),
    ]
    rest = diff_tables(d)
    for t in rest:
        t.collapsed = True
    left: list[str] = []
    for title, t in [*tables, *(("", t) for t in rest)]:
        if not t.headers or not t.rows:
            continue
        block = ([f"## {title}", ""] if title else []) + [""]
        budget = MAX_CHARS - 200 - len(out) - len("\n".join(block))
        lines = _fit(t, budget) if budget > 0 else None
        if lines is None:
            left.append(title or t.caption)
            continue
        out += "\n" + "\n".join(block[:-1] + lines) + "\n"
    if left:
        out += (
            "\n"
            + md_escape(f"Left out to stay under {fmt.count(MAX_CHARS)} characters: " + ", ".join(left))[:180]
            + "\n"
        )
    return out
