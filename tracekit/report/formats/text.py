"""Plain text for the terminal: tables, documents of sections, and the diff."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tracekit.report.names import cut_name
from tracekit.report.sections.blocks import Section, Table
from tracekit.report.sections.diff import diff_tables, gate_table
from tracekit.report.sections.features import features_pair_table

if TYPE_CHECKING:
    from tracekit.report.diff import Diff


def text_table(t: Table, max_width: int = 60) -> str:
    """Fixed-width columns; cells longer than ``max_width`` are cut with an ellipsis (names.cut_name)."""
    rows = [[cut_name(c, max_width) for c in r] for r in [t.headers, *t.rows]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(t.headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return (f"{t.caption}\n" if t.caption else "") + "\n".join(lines)


def render_document(title: str, lead: list[str], sections: list[Section], diagnostic: str | None = None) -> str:
    """A titled document of sections as plain text (the ``analyze`` screen): the title, the
    CPU-diagnostic label, the lead lines, then each section's underlined title, its paragraphs and
    its tables, a blank line between two (cells longer than 120 characters cut with an ellipsis)."""
    out = [title]
    if diagnostic:
        out.append(f"*** {diagnostic} ***")
    out += lead
    for s in sections:
        out += ["", s.title, "=" * len(s.title), *s.paragraphs]
        for i, t in enumerate(s.tables):
            out += [*([""] if i else []), text_table(t, 120)]
    return "\n".join(out) + "\n"


def render_diff(d: Diff, style: str = "text") -> str:
    """``text`` (terminal) or ``json``; Markdown is :func:`tracekit.report.formats.diff_markdown.render_md`."""
    if style == "json":
        return json.dumps(d.to_json(), indent=2) + "\n"
    head = "".join(f"{line}\n" for line in d.side_lines()) + "".join(
        f"*** {line} ***\n" for line in d.diagnostic_lines()
    )
    tables = []
    if d.features_a or d.features_b:
        tables.append(features_pair_table(d.features_a, d.features_b))
    if d.gate is not None:
        head = d.gate.verdict() + "\n" + head + "".join(f"note: {n}\n" for n in d.gate.notes)
        tables.append(gate_table(d.gate))
    tables += diff_tables(d)
    return head + "\n" + "\n\n".join(text_table(t) for t in tables if t.rows) + "\n"
