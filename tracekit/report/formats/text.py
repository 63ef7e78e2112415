"""Plain-text tables for the terminal, and the diff rendered as text / Markdown tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import Section, Table

if TYPE_CHECKING:  # the analyze screen renders text without polars
    import polars as pl

    from tracekit.report.diff import Diff
    from tracekit.report.gate import Gate


def text_table(t: Table, max_width: int = 60) -> str:
    """Fixed-width columns; cells longer than ``max_width`` are cut with an ellipsis."""

    def cut(s: str) -> str:
        s = s.replace("\n", " ")
        return s if len(s) <= max_width else s[: max_width - 1] + "…"

    rows = [[cut(h) for h in t.headers]] + [[cut(c) for c in r] for r in t.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(t.headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return (f"{t.caption}\n" if t.caption else "") + "\n".join(lines)


def render_document(
    title: str, lead: list[str], sections: list[Section], diagnostic: str | None = None, max_width: int = 120
) -> str:
    """A titled document of sections as plain text (the ``analyze`` screen): the title, the
    CPU-diagnostic label, the lead lines, then each section's underlined title, its paragraphs and
    its tables, a blank line between two (cells longer than ``max_width`` cut with an ellipsis)."""
    out = [title]
    if diagnostic:
        out.append(f"*** {diagnostic} ***")
    out += lead
    for s in sections:
        out += ["", s.title, "=" * len(s.title), *s.paragraphs]
        for i, t in enumerate(s.tables):
            out += [*([""] if i else []), text_table(t, max_width)]
    return "\n".join(out) + "\n"


def _change(v: Any) -> str:
    return fmt.change(v)


def _delta(m: str, v: Any) -> str:
    """B − A in the metric's unit; a difference of two shares is in percentage points (pp)."""
    if v is None:
        return "–"
    if fmt.value(m, 0.5).endswith(" %") and not m.endswith("_pct"):  # a share (fraction) column
        return fmt.pp(float(v))
    return fmt.value(m, v)


def long_table(df: pl.DataFrame, key: str, caption: str) -> Table:
    rows = []
    for r in df.iter_rows(named=True):
        m = str(r["metric"])
        rows.append(
            [
                str(r[key]),
                fmt.label(m),
                fmt.value(m, r["a"]),
                fmt.value(m, r["b"]),
                _delta(m, r["delta"]),
                _change(r["change"]),
            ]
        )
    return Table([key, "metric", "A", "B", "B − A", "change"], rows, caption)


def moved_table(df: pl.DataFrame, caption: str) -> Table:
    rows = [
        [
            str(r["name"]),
            fmt.count(r["count_a"]),
            fmt.count(r["count_b"]),
            fmt.duration(r["time_a_ns"]),
            fmt.duration(r["time_b_ns"]),
            fmt.duration(r["delta_ns"]),
            _change(r["change"]),
        ]
        for r in df.iter_rows(named=True)
    ]
    return Table(["name", "calls A", "calls B", "time A", "time B", "B − A", "change"], rows, caption)


def gate_table(g: Gate) -> Table:
    """The gate's checks: phase, metric, A, B, change, its 95 % interval, the test, REGRESSED."""
    rows = []
    for r in g.checks.iter_rows(named=True):
        ci = "–" if r["ci_low"] is None else f"{fmt.change(r['ci_low'])} to {fmt.change(r['ci_high'])}"
        stat = "total" if r["stat"] == "sum" else str(r["stat"])
        rows.append(
            [
                str(r["phase"]),
                f"{r['metric']} {stat}",
                fmt.duration(r["a"]),
                fmt.duration(r["b"]),
                _change(r["change"]),
                ci,
                str(r["method"]),
                "REGRESSED" if r["regressed"] else "",
            ]
        )
    caption = f"gate: slower by more than {fmt.percent(g.threshold, 0)} beyond noise fails"
    return Table(["phase", "metric", "A", "B", "change", "95 % interval", "test", ""], rows, caption)


def matched_table(df: pl.DataFrame) -> Table:
    """Work matched through (op, shape) on both sides, with each side's main kernel."""
    rows = [
        [
            str(r["op"]),
            str(r["shape"]),
            str(r["op_class"] or ""),
            fmt.count(r["count_a"]),
            fmt.count(r["count_b"]),
            fmt.duration(r["time_a_ns"]),
            fmt.duration(r["time_b_ns"]),
            fmt.duration(r["delta_ns"]),
            _change(r["change"]),
            str(r["kernel_a"] or ""),
            str(r["kernel_b"] or ""),
        ]
        for r in df.iter_rows(named=True)
    ]
    headers = [
        "op",
        "shapes",
        "class",
        "calls A",
        "calls B",
        "time A",
        "time B",
        "B − A",
        "change",
        "kernel A",
        "kernel B",
    ]
    return Table(headers, rows, "operators matched by name and input shapes (kernel names may differ)")


def unmatched_table(d: Diff) -> Table:
    """Work on one side only, with the matched / unmatched device time of each side."""
    t = d.work_totals
    caption = "work on one side only (no operator with the same shapes on the other)"
    if t:
        caption += (
            f": matched {fmt.duration(t['matched_a_ns'])} of A, {fmt.duration(t['matched_b_ns'])} of B; "
            f"unmatched {fmt.duration(t['unmatched_a_ns'])} of A, {fmt.duration(t['unmatched_b_ns'])} of B"
        )
    rows = [
        [
            str(r["side"]),
            str(r["op"]),
            str(r["shape"]),
            str(r["op_class"] or ""),
            fmt.count(r["count"]),
            fmt.duration(r["time_ns"]),
        ]
        for r in d.unmatched.iter_rows(named=True)
    ]
    return Table(["side", "op", "shapes (kernel without an op)", "class", "calls", "time"], rows, caption)


def diff_tables(d: Diff) -> list[Table]:
    verdict_rows = [
        [
            str(r["phase"]),
            str(r["bound_a"] or "–"),
            str(r["bound_b"] or "–"),
            "CHANGED" if r["changed"] else "",
            str(r["reason_a"] or ""),
            str(r["reason_b"] or ""),
        ]
        for r in d.verdicts.iter_rows(named=True)
    ]
    return [
        Table(["phase", "verdict A", "verdict B", "", "reason A", "reason B"], verdict_rows, "verdicts"),
        long_table(d.phases, "phase", "per phase"),
        long_table(d.regions, "kind", "per region kind (numbers in names → N)"),
        *(
            [long_table(d.speculative, "phase", "speculative decoding: draft and verify per phase")]
            if d.speculative.height
            else []
        ),
        moved_table(d.kernels, "kernels that moved most (total device time)"),
        moved_table(d.ops, "operators that moved most (device time of the work they launched)"),
        *([matched_table(d.matched)] if d.matched.height else []),
        *([unmatched_table(d)] if d.unmatched.height else []),
        *([moved_table(d.classes, "op classes (whole trace)")] if d.classes.height else []),
    ]


def render_diff(d: Diff, style: str = "text") -> str:
    """``text`` (terminal) or ``json``; Markdown is :func:`tracekit.report.formats.diff_markdown.render_md`."""
    if style == "json":
        import json

        return json.dumps(d.to_json(), indent=2) + "\n"
    head = f"A: {d.a_label}\nB: {d.b_label}\n" + "".join(f"*** {line} ***\n" for line in d.diagnostic_lines())
    tables = []
    if d.features_a or d.features_b:
        from tracekit.report.sections.features import features_pair_table

        tables.append(features_pair_table(d.features_a, d.features_b))
    if d.gate is not None:
        head = d.gate.verdict() + "\n" + head + "".join(f"note: {n}\n" for n in d.gate.notes)
        tables.append(gate_table(d.gate))
    tables += diff_tables(d)
    return head + "\n" + "\n\n".join(text_table(t) for t in tables if t.rows) + "\n"
