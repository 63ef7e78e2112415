"""The renderer-neutral building blocks of every output: a :class:`Document` is what a section
builder reads, a :class:`Section` holds paragraphs and :class:`Table` s of formatted cells;
:func:`table` formats rows into one (short names with the full text kept, "–" for measured
columns below the coverage threshold).

Cells are formatted but *not* escaped: the Markdown and HTML renderers escape every cell and
every paragraph, so a kernel named ``<script>…`` can never become markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Sequence

from tracekit.report import fmt
from tracekit.report.sections.low_coverage import DEFAULT_MIN_COVERAGE, MEASURED, low_coverage
from tracekit.report.model import ReportData, cell, nested
from tracekit.report.names import short_name

if TYPE_CHECKING:
    from tracekit.analysis.contract.types import AnalysisDoc

LONG_LIST = 12  # more rows than this go into a collapsed <details>
NAME_COLUMNS = ("name",)  # shortened to names.WIDTH characters; the full name goes on hover / in details


def min_coverage(doc: Mapping[str, Any]) -> float:
    """The coverage threshold the analysis judged with (``totals.thresholds.min_coverage`` of the
    analysis document), else the default."""
    th = (doc.get("totals") or {}).get("thresholds")
    v = th.get("min_coverage") if isinstance(th, Mapping) else None
    return float(v) if isinstance(v, (int, float)) else DEFAULT_MIN_COVERAGE


@dataclass(frozen=True)
class Document:
    """What a section builder reads: the analysis document (docs/json.md), how many regions the
    screen lists (-1: all), and for the report its frames (None on the ``analyze`` screen)."""

    doc: AnalysisDoc
    regions: int = 40
    frames: ReportData | None = None

    @property
    def report(self) -> ReportData:
        """The report's frames; a builder tagged only for the report may read them."""
        if self.frames is None:
            raise ValueError("this section reads the report's frames: tag it for the report only")
        return self.frames


@dataclass
class Table:
    """Formatted cells. ``full``: column index → the full text of each row's cell where the cell
    shows a shortened name (None where not shortened). ``cappable``: a renderer may show only the
    first rows (they are ordered by importance) and then says so in ``left_out``."""

    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    collapsed: bool = False
    full: dict[int, list[str | None]] = field(default_factory=dict)
    cappable: bool = False
    zero_rows: int = 0  # rows at the end without device work (for the left-out line)


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    anchor: str = ""


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    caption: str = "",
    collapse: bool | None = None,
    min_cov: float | None = None,
) -> Table:
    """Rows → formatted table (only ``columns`` that some row has, in that order; without
    ``columns``, every key of a plain value in first-seen order). Name columns show
    :func:`~tracekit.report.names.short_name`; the full names are kept in ``Table.full``. With
    ``min_cov``, a row whose coverage is below it prints its FLOPs, bytes and rates as "–"."""
    present = dict.fromkeys(k for r in rows for k, v in r.items() if not nested(v))
    cols = [c for c in (columns or present) if c in present]
    cells = [
        [
            "–" if c in MEASURED and min_cov is not None and low_coverage(r, min_cov) else fmt.value(c, cell(r.get(c)))
            for c in cols
        ]
        for r in (rows if cols else [])
    ]
    full: dict[int, list[str | None]] = {}
    for i, c in enumerate(cols):
        if c in NAME_COLUMNS:
            originals = [row[i] for row in cells]
            shorts = [short_name(o) for o in originals]
            if any(sh != o for sh, o in zip(shorts, originals)):
                full[i] = [o if sh != o else None for sh, o in zip(shorts, originals)]
                for row, sh in zip(cells, shorts):
                    row[i] = sh
    return Table(
        [fmt.label(c) for c in cols], cells, caption, len(cells) > LONG_LIST if collapse is None else collapse, full
    )
