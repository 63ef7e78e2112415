"""The report model: what every renderer reads, the analysis document itself.

Renderers never touch trace files: they read a :class:`ReportData` — the analysis result's JSON
contract (``AnalysisResult.to_json()``, docs/json.md; typed in tracekit/analysis/contract), the
environment (device, versions, runner sidecar) and optional device activity intervals for the
timeline. Sections read the document's rows as they are (:meth:`ReportData.rows`); the plots and
the diff, which compute over columns, read the same rows as a frame (:meth:`ReportData.frame`).
Column names of the contract are used as they come; the few that renderers depend on are listed
in docs/reports.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import polars as pl

from tracekit.analysis.contract.types import AnalysisDoc
from tracekit.conventions import HARDWARE_HINT

PHASE_ORDER = ("prefill", "decode", "mixed", "other", "all")
Rows = list[dict[str, Any]]
# the document's row lists a section or plot reads: per phase ones carry a "phase" key
RowsName = Literal[
    "regions",
    "phases",
    "unattributed",
    "top_kernels",
    "top_ops",
    "op_classes",
    "class_roofline",
    "trace_top_kernels",
    "trace_top_ops",
]


@dataclass(frozen=True)
class ReportData:
    """Everything a renderer may show. ``missing`` says what is absent and why."""

    doc: AnalysisDoc  # the analysis JSON contract (docs/json.md), as produced by to_json()
    environment: dict[str, Any] = field(default_factory=dict)
    activities: pl.DataFrame | None = None  # device, stream, start_ns, end_ns (timeline only)
    missing: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        src = str((self.doc.get("trace") or {}).get("source") or "trace")
        return src.rsplit("/", 1)[-1]

    @property
    def diagnostic(self) -> str | None:
        """The CPU-diagnostic label (docs/json.md ``diagnostic``), or None for a GPU trace."""
        d = self.doc.get("diagnostic")
        return str(d) if d else None

    @property
    def device(self) -> dict[str, Any]:
        dev = self.doc.get("device")
        return dict(dev) if isinstance(dev, Mapping) else {}

    @property
    def totals(self) -> dict[str, Any]:
        t = self.doc.get("totals")
        return dict(t) if isinstance(t, Mapping) else {}

    @property
    def whole(self) -> dict[str, Any]:
        """Whole-trace metrics and verdict (``totals.trace`` in the contract; else totals itself)."""
        t = self.totals
        w = t.get("trace")
        return dict(w) if isinstance(w, Mapping) else t

    def rows(self, name: RowsName) -> Rows:
        """The document's rows of ``name``: the regions; the phases in :data:`PHASE_ORDER` with their
        latency percentiles as ``ttft_p50_ms``-style keys; unattributed time by reason; the per-phase
        lists (top_kernels, top_ops, op_classes, class_roofline) with a ``phase`` key;
        ``trace_top_*``: the whole trace's top lists."""
        d = self.doc
        if name == "regions":
            return _records(d.get("regions"))
        if name == "phases":
            return _ordered([_with_latency(p) for p in _records(d.get("phases"))])
        if name == "unattributed":
            un = d.get("unattributed")
            by = un.get("by_reason") if isinstance(un, Mapping) else un
            return _records(by if by is not None else [un])
        if name.startswith("trace_"):
            return _records(self.totals.get(name.removeprefix("trace_")))
        rows = [{"phase": p.get("phase"), **r} for p in _records(d.get("phases")) for r in _records(p.get(name))]
        return _ordered(rows)

    def frame(self, name: RowsName, columns: tuple[str, ...] | None = None) -> pl.DataFrame:
        """:meth:`rows` as a frame (nested records left out, lists as text) for the plots and the
        diff; with ``columns``, only those of them the rows hold. The regions are read in place,
        not copied first (100,000 regions: ~600 MB of copied records)."""
        regions = self.doc.get("regions") if name == "regions" else None
        source = (
            (r for r in regions if isinstance(r, Mapping))
            if isinstance(regions, list)
            else ([] if name == "regions" else self.rows(name))
        )
        rows = [
            {k: cell(v) for k, v in r.items() if (columns is None or k in columns) and not nested(v)} for r in source
        ]
        if not rows:
            return pl.DataFrame()
        keys = list(dict.fromkeys(k for r in rows for k in r))  # first-seen order, O(cells)
        return pl.DataFrame({k: [r.get(k) for r in rows] for k in keys}, strict=False, infer_schema_length=None)


def _records(rows: Any) -> Rows:
    """A list of records (anything else → none): the document's row lists."""
    return [dict(r) for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


def _any_record(rows: Any) -> bool:
    """Whether :func:`_records` of ``rows`` is not empty (without copying them)."""
    return isinstance(rows, list) and any(isinstance(r, Mapping) for r in rows)


def nested(v: Any) -> bool:
    return isinstance(v, Mapping) or (isinstance(v, list) and bool(v) and isinstance(v[0], Mapping))


def cell(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _with_latency(p: dict[str, Any]) -> dict[str, Any]:
    """A phase record's ``{"latency": {"ttft": {"unit": "ms", "p50": 1.0, ...}}}`` → flat
    ``ttft_p50_ms`` keys (the unit becomes the suffix the formatter reads)."""
    lat = p.pop("latency", None)
    for metric, row in lat.items() if isinstance(lat, Mapping) else ():
        if isinstance(row, Mapping):
            unit = str(row.get("unit") or "")
            suffix = f"_{unit}" if unit else ""
            p.update({f"{metric}_{pct}{suffix}": row[pct] for pct in ("p50", "p90", "p99") if pct in row})
    return p


def _ordered(rows: Rows) -> Rows:
    """Rows in :data:`PHASE_ORDER` of their phase (unknown phases last), then by rank; stable."""
    rank = {p: i for i, p in enumerate(PHASE_ORDER)}
    return sorted(rows, key=lambda r: (rank.get(str(r.get("phase")), len(rank)), r.get("rank") or 0))


def from_json(
    doc: AnalysisDoc,
    *,
    environment: Mapping[str, Any] | None = None,
    activities: pl.DataFrame | None = None,
) -> ReportData:
    """The report model of the analysis document ``doc``, with what it lacks said in ``missing``."""
    d = doc
    missing: list[str] = []
    if not _any_record(d.get("regions")):
        missing.append("no regions: the trace has no annotations the analysis could use")
    if not _records(d.get("phases")) and not any(
        str(w).startswith("no phase") for w in ((d.get("totals") or {}).get("warnings") or [])
    ):
        missing.append("no phases found")
    dev_raw = d.get("device")
    dev: Mapping[str, Any] = dev_raw if isinstance(dev_raw, Mapping) else {}
    if dev.get("hint"):
        missing.append(str(dev["hint"]))
    elif not dev.get("peak_flops_per_s"):
        missing.append(f"device peaks unknown: {HARDWARE_HINT}")
    tot_raw = d.get("totals")
    tot: Mapping[str, Any] = tot_raw if isinstance(tot_raw, Mapping) else {}
    missing += [str(w) for w in (tot.get("warnings") or [])]
    missing += [str(w) for w in (dev.get("calibration_warnings") or [])]
    return ReportData(doc=d, environment=dict(environment or {}), activities=activities, missing=tuple(missing))


def from_result(
    result: Any,
    *,
    environment: Mapping[str, Any] | None = None,
    activities: pl.DataFrame | None = None,
) -> ReportData:
    """The report model of an ``AnalysisResult`` (its to_json())."""
    return from_json(result.to_json(), environment=environment, activities=activities)
