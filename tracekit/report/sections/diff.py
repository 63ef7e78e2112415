"""The diff's content (``tracekit diff``): two analysed runs compared as renderer-neutral tables —
verdicts, per-phase and per-region-kind figures with their change, the kernels, operators and op
classes that moved, work matched by (op, shapes), and the gate's checks. Rendered by
tracekit/report/formats/text.py (terminal) and tracekit/report/formats/diff_markdown.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import Table

if TYPE_CHECKING:
    import polars as pl

    from tracekit.report.diff import Diff
    from tracekit.report.gate import Gate


def delta(m: str, v: Any) -> str:
    """B − A in the metric's unit; a difference of two shares is in percentage points (pp)."""
    if v is None:
        return fmt.DASH
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
                delta(m, r["delta"]),
                fmt.change(r["change"]),
            ]
        )
    return Table([key, "metric", "A", "B", "B − A", "change"], rows, caption)


CALLS_TIMES = ["calls A", "calls B", "time A", "time B", "B − A", "change"]


def _calls_times(r: dict[str, Any]) -> list[str]:
    """The :data:`CALLS_TIMES` cells of a moved or matched row: each side's calls and time, B − A, change."""
    return [
        *(fmt.count(r[k]) for k in ("count_a", "count_b")),
        *(fmt.duration(r[k]) for k in ("time_a_ns", "time_b_ns", "delta_ns")),
        fmt.change(r["change"]),
    ]


def moved_table(df: pl.DataFrame, caption: str) -> Table:
    rows = [[str(r["name"]), *_calls_times(r)] for r in df.iter_rows(named=True)]
    return Table(["name", *CALLS_TIMES], rows, caption)


def gate_table(g: Gate) -> Table:
    """The gate's checks: phase, metric, A, B, change, its 95 % interval, the test, REGRESSED."""
    rows = [
        [
            str(r["phase"]),
            f"{r['metric']} {'total' if r['stat'] == 'sum' else str(r['stat'])}",
            fmt.duration(r["a"]),
            fmt.duration(r["b"]),
            fmt.change(r["change"]),
            fmt.DASH if r["ci_low"] is None else f"{fmt.change(r['ci_low'])} to {fmt.change(r['ci_high'])}",
            str(r["method"]),
            "REGRESSED" if r["regressed"] else "",
        ]
        for r in g.checks.iter_rows(named=True)
    ]
    failed = int(g.checks["regressed"].sum()) if g.checks.height else 0
    caption = (
        f"gate checks ({fmt.count(g.checks.height, 'check')}, {fmt.count(failed, 'regression')}): a check fails "
        f"when slower by more than {fmt.percent(g.threshold, 0)} beyond noise"
    )
    return Table(["phase", "metric", "A", "B", "change", "95 % interval", "test", ""], rows, caption)


def matched_table(df: pl.DataFrame) -> Table:
    """Work matched through (op, shape) on both sides, with each side's main kernel."""
    rows = [
        [str(r["op"]), str(r["shape"]), str(r["op_class"] or ""), *_calls_times(r)]
        + [str(r["kernel_a"] or ""), str(r["kernel_b"] or "")]
        for r in df.iter_rows(named=True)
    ]
    headers = ["op", "shapes", "class", *CALLS_TIMES, "kernel A", "kernel B"]
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
            str(r["bound_a"] or fmt.DASH),
            str(r["bound_b"] or fmt.DASH),
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
        *([long_table(d.layers, "layer", "per layer and role (every step)")] if d.layers.height else []),
        *([long_table(d.memory, "phase", "device memory per phase")] if d.memory.height else []),
        moved_table(d.kernels, "kernels that moved most (total device time)"),
        moved_table(d.ops, "operators that moved most (device time of the work they launched)"),
        *([matched_table(d.matched)] if d.matched.height else []),
        *([unmatched_table(d)] if d.unmatched.height else []),
        *([moved_table(d.classes, "op classes (whole trace)")] if d.classes.height else []),
    ]
