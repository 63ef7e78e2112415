"""The report model: what every renderer reads, built from an analysis result's JSON contract.

Renderers never touch trace files: they read a :class:`ReportData` built from
``AnalysisResult.to_json()`` (issue 4 §8; docs/json.md), the result's top-kernel / top-op frames
when present, the environment (device, versions, runner sidecar) and optional device
activity intervals for the timeline. Column names of the contract are used as they come; the
few that renderers depend on are listed in docs/reports.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import polars as pl

from tracekit.analysis.contract.types import AnalysisDoc

PHASE_ORDER = ("prefill", "decode", "mixed", "other", "all")


@dataclass(frozen=True)
class ReportData:
    """Everything a renderer may show. Frames may be empty; ``missing`` says what is absent and why."""

    doc: AnalysisDoc  # the analysis JSON contract (docs/json.md), as produced by to_json()
    regions: pl.DataFrame
    phases: pl.DataFrame
    top_kernels: pl.DataFrame
    top_ops: pl.DataFrame
    unattributed: pl.DataFrame
    environment: dict[str, Any] = field(default_factory=dict)
    activities: pl.DataFrame | None = None  # device, stream, start_ns, end_ns (timeline only)
    missing: tuple[str, ...] = ()
    top_kernels_all: pl.DataFrame = field(default_factory=pl.DataFrame)  # result's frame, every scope
    top_ops_all: pl.DataFrame = field(default_factory=pl.DataFrame)
    op_classes: pl.DataFrame = field(default_factory=pl.DataFrame)  # per phase: op_class, count, device_time_ns
    class_roofline: pl.DataFrame = field(default_factory=pl.DataFrame)  # per phase: the per-class roofline rows

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


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts → dotted keys (``{"tpot": {"p50_ns": 1}}`` → ``{"tpot.p50_ns": 1}``)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def records_frame(rows: Any) -> pl.DataFrame:
    """A list of flat-or-nested dicts (or a dict keyed by name) → a frame; lists become text."""
    if rows is None:
        return pl.DataFrame()
    if isinstance(rows, pl.DataFrame):
        return rows
    if isinstance(rows, Mapping):
        # {"prefill": {...}, "decode": {...}} → rows with a "phase" column
        rows = [{"phase": k, **(flatten(v) if isinstance(v, Mapping) else {"value": v})} for k, v in rows.items()]
    else:
        rows = [flatten(_drop_nested_lists(r)) if isinstance(r, Mapping) else {"value": r} for r in rows]
    if not rows:
        return pl.DataFrame()
    keys = list(dict.fromkeys(k for r in rows for k in r))  # first-seen order, O(cells)
    cols: dict[str, list[Any]] = {k: [_cell(r.get(k)) for r in rows] for k in keys}
    return pl.DataFrame(cols, strict=False, infer_schema_length=None)


def _drop_nested_lists(r: Mapping[str, Any]) -> dict[str, Any]:
    """Lists of records inside a record (per-region top kernels, step-time tables) are not cells."""
    return {k: v for k, v in r.items() if not (isinstance(v, list) and v and isinstance(v[0], Mapping))}


def latency_columns(phases: Any) -> Any:
    """``{"latency": {"ttft": {"unit": "ms", "p50": 1.0, ...}}}`` inside each phase record →
    flat ``ttft_p50_ms`` keys (the unit becomes the suffix the formatter reads)."""
    if not isinstance(phases, list):
        return phases
    out = []
    for p in phases:
        if not isinstance(p, Mapping):
            out.append(p)
            continue
        q = {k: v for k, v in p.items() if k != "latency"}
        lat = p.get("latency")
        if isinstance(lat, Mapping):
            for metric, row in lat.items():
                if not isinstance(row, Mapping):
                    continue
                unit = str(row.get("unit") or "")
                suffix = {"ms": "_ms", "ns": "_ns", "us": "_us", "s": "_s"}.get(unit, f"_{unit}" if unit else "")
                for pct in ("p50", "p90", "p99"):
                    if pct in row:
                        q[f"{metric}_{pct}{suffix}"] = row[pct]
        out.append(q)
    return out


def top_frame(doc_phases: Any, key: str) -> pl.DataFrame:
    """Per-phase top kernels/ops nested in the JSON phases → one frame with a ``phase`` column."""
    rows: list[dict[str, Any]] = []
    if isinstance(doc_phases, list):
        for p in doc_phases:
            if isinstance(p, Mapping) and isinstance(p.get(key), list):
                rows += [{"phase": p.get("phase"), **r} for r in p[key] if isinstance(r, Mapping)]
    return records_frame(rows)


def per_phase(top: pl.DataFrame) -> pl.DataFrame:
    """A result's top-N frame (``scope_kind, scope, rank, name, ...``) → its per-phase rows."""
    if top.height == 0 or "scope_kind" not in top.columns:
        return top
    out = top.filter(pl.col("scope_kind") == "phase").drop("scope_kind").rename({"scope": "phase"})
    return _order_phases(out)


def _cell(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def from_json(
    doc: AnalysisDoc,
    *,
    top_kernels: pl.DataFrame | None = None,
    top_ops: pl.DataFrame | None = None,
    environment: Mapping[str, Any] | None = None,
    activities: pl.DataFrame | None = None,
) -> ReportData:
    """Build the report model from the analysis JSON contract plus optional frames."""
    d = doc
    missing: list[str] = []
    regions = records_frame(d.get("regions"))
    phases = _order_phases(records_frame(latency_columns(d.get("phases"))))
    tk = per_phase(top_kernels) if top_kernels is not None else top_frame(d.get("phases"), "top_kernels")
    to = per_phase(top_ops) if top_ops is not None else top_frame(d.get("phases"), "top_ops")
    un = d.get("unattributed")
    if isinstance(un, Mapping):
        by = un.get("by_reason")
        unattributed = records_frame(by) if by is not None else records_frame([un])
        if isinstance(by, Mapping) and "phase" in unattributed.columns:
            unattributed = unattributed.rename({"phase": "reason"})
    else:
        unattributed = records_frame(un)
    if regions.height == 0:
        missing.append("no regions: the trace has no annotations the analysis could use")
    if phases.height == 0 and not any(
        str(w).startswith("no phase") for w in ((d.get("totals") or {}).get("warnings") or [])
    ):
        missing.append("no phases found")
    dev_raw = d.get("device")
    dev: Mapping[str, Any] = dev_raw if isinstance(dev_raw, Mapping) else {}
    if dev.get("hint"):
        missing.append(str(dev["hint"]))
    elif not dev.get("peak_flops_per_s"):
        missing.append("device peaks unknown: pass --hardware NAME|FILE")
    tot_raw = d.get("totals")
    tot: Mapping[str, Any] = tot_raw if isinstance(tot_raw, Mapping) else {}
    missing += [str(w) for w in (tot.get("warnings") or [])]
    missing += [str(w) for w in (dev.get("calibration_warnings") or [])]
    return ReportData(
        doc=d,
        regions=regions,
        phases=phases,
        top_kernels=tk,
        top_ops=to,
        op_classes=top_frame(d.get("phases"), "op_classes"),
        class_roofline=top_frame(d.get("phases"), "class_roofline"),
        unattributed=unattributed,
        environment=dict(environment or {}),
        activities=activities,
        missing=tuple(missing),
        top_kernels_all=top_kernels if top_kernels is not None else pl.DataFrame(),
        top_ops_all=top_ops if top_ops is not None else pl.DataFrame(),
    )


def from_result(
    result: Any,
    *,
    environment: Mapping[str, Any] | None = None,
    activities: pl.DataFrame | None = None,
) -> ReportData:
    """Build the report model from an ``AnalysisResult`` (its to_json() plus its frames)."""
    doc = result.to_json()
    tk = getattr(result, "top_kernels", None)
    to = getattr(result, "top_ops", None)
    return from_json(
        doc,
        top_kernels=tk if isinstance(tk, pl.DataFrame) else None,
        top_ops=to if isinstance(to, pl.DataFrame) else None,
        environment=environment,
        activities=activities,
    )


def _order_phases(df: pl.DataFrame) -> pl.DataFrame:
    if df.height == 0 or "phase" not in df.columns:
        return df
    rank = {p: i for i, p in enumerate(PHASE_ORDER)}
    keys = ["_o", "rank"] if "rank" in df.columns else ["_o"]
    return (
        df.with_columns(
            pl.col("phase").cast(pl.String).replace_strict(rank, default=len(rank), return_dtype=pl.Int64).alias("_o")
        )
        .sort(keys, maintain_order=True)
        .drop("_o")
    )
