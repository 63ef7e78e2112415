"""``AnalysisResult``: the frames an analysis returns, and their stable JSON form (docs/json.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import polars as pl

from tracekit.analysis.contract.types import AnalysisDoc
from tracekit.analysis.contract.rows import (
    TOP_JSON,
    clean,
    encoded_rows,
    extra_lists,
    gc_paused,
    latency_key,
    plain,
    records,
    row_chunks,
    scopes_by_kind,
    strip_keys,
)
from tracekit.conventions import ABOVE_ROOF_COLUMN, COST_COLUMNS, CPU_DIAGNOSTIC, PEAK_FRACTION_COLUMNS
from tracekit.analysis.verdict import BOUNDS
from tracekit.analysis.idle.causes import CAUSE_COLUMNS
import uuid

__all__ = ["CPU_DIAGNOSTIC", "JSON_VERSION", "AnalysisResult"]

JSON_VERSION = 1

# Column blocks the region and phase rows share, in their JSON order (docs/json.md).
_SPAN = ["start_ns", "end_ns", "span_ns", "busy_ns", "idle_ns", "gap_count", "kernel_count", *COST_COLUMNS]
_ROOF = ["busy_ratio", "gap_total_ns", "gap_max_ns", "kernel_median_ns", "device_time_ns", "dtype"]
_ROOF += ["peak_flops_per_s", "peak_bytes_per_s", "ridge", *PEAK_FRACTION_COLUMNS, ABOVE_ROOF_COLUMN]
# issue 12: idle time by cause, the top culprit, the dominant op class; issue 40: the window's time
# the device ran other work (not idle), its queued part, whose
_IDLE = [*CAUSE_COLUMNS, "idle_causes_ns", "idle_top", "class_top", "other_busy_ns", "queued_ns", "other_top"]
_LAUNCH = [f"launch_{m}_{q}_ns" for m in ("delay", "latency", "queued") for q in ("p50", "p99", "max")]

# Region columns written to JSON, in order (docs/json.md). The first block is the contract of
# issue 4 §8; the rest are documented additions.
REGION_JSON_COLUMNS = [
    *("name", "phase", "phase_rule", "step", *_SPAN, "coverage", "bound", "reason", "region_id", "parent_id"),
    *("depth", "kind", "span_source", "cpu_start_ns", "cpu_end_ns", "cpu_dur_ns", *_ROOF, "batch", "ctx"),
    *("tokens", "prefill_tokens", "decode_seqs", "first_launch_ns", *_IDLE),
    "warmup",  # issue 40 item 3: a phase unit before its phase's step times settle (docs/analysis.md "Warm-up")
]
# issue 40: each launch's wait from its call's end split into launch latency (stream free, device
# idle) and queued (behind earlier work on the stream or while the device ran other work)
PHASE_JSON_COLUMNS = [
    *("phase", "region_count", *_SPAN, "coverage", "bound", "reason", *_ROOF, *_IDLE),
    *("launch_delay_count", *_LAUNCH),
]


STEP_DISAGREEING_JSON = 5  # disagreeing steps listed per phase (all are counted)


def step_verdict_summary(sv: pl.DataFrame, phase: str) -> dict[str, Any]:
    """``phases[].step_verdicts`` (docs/json.md): ``steps``, ``by_verdict`` (count per verdict, in
    the order of verdict.BOUNDS), ``median_step`` and the steps whose verdict differs from the
    median step's (``disagreeing_count``; the first :data:`STEP_DISAGREEING_JSON` in start order),
    each ``{region_id, step, name, span_ns, bound, reason}``."""

    rows = sv.filter(pl.col("phase") == phase).to_dicts() if sv.height and "phase" in sv.columns else []
    keys = ("region_id", "step", "name", "span_ns", "bound", "reason")
    med = next((r for r in rows if r["median"]), None)
    counts = {b: sum(r["bound"] == b for r in rows) for b in BOUNDS}
    other = [r for r in rows if med is not None and r["bound"] != med["bound"]]
    return {
        "steps": len(rows),
        "by_verdict": {b: c for b, c in counts.items() if c},
        "median_step": {k: med[k] for k in keys} if med is not None else None,
        "disagreeing_count": len(other),
        "disagreeing": [{k: r[k] for k in keys} for r in other[:STEP_DISAGREEING_JSON]],
    }


@dataclass(frozen=True)
class AnalysisResult:
    """What :func:`tracekit.analysis.analyze` returns. Every frame is documented in docs/analysis.md.

    regions: one row per analysed CPU-side region (metrics, verdict, reason).
    phases: one row per phase found (prefill / decode / mixed / other), aggregated over the
        outermost region of each phase ("phase units"), so nested regions never count twice.
    unattributed: device time not attributed to any region, by reason.
    top_kernels / top_ops: the 10 names with most device time per scope (trace, phase, region).
    op_classes: device time and kernel count per op class (gemm, attention, ...; every kernel)
        per scope (trace, phase, region).
    latency: TTFT / TPOT / ITL / step-time percentiles (one row per metric).
    steps: one row per phase unit in time order (the decode steps give ITL).
    requests: one row per request (or request batch) with TTFT, TPOT, output tokens, SLO check.
    decode_by_ctx: decode step time per context-length bucket.
    totals: whole-trace metrics and verdict, the conservation check, counts and thresholds.
    """

    trace: dict[str, Any]
    device: dict[str, Any]
    diagnostic: str | None
    regions: pl.DataFrame
    phases: pl.DataFrame
    unattributed: pl.DataFrame
    top_kernels: pl.DataFrame
    top_ops: pl.DataFrame
    totals: dict[str, Any]
    latency: pl.DataFrame
    steps: pl.DataFrame
    requests: pl.DataFrame
    decode_by_ctx: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    op_classes: pl.DataFrame = field(default_factory=pl.DataFrame)
    serving: dict[str, Any] = field(
        default_factory=dict
    )  # analysis/serving/metrics.py: composition, interference, requests
    communication: pl.DataFrame = field(default_factory=pl.DataFrame)  # per phase; tracekit/analysis/communication.py
    idle_culprits: pl.DataFrame = field(default_factory=pl.DataFrame)
    class_roofline: pl.DataFrame = field(default_factory=pl.DataFrame)
    shape_roofline: pl.DataFrame = field(default_factory=pl.DataFrame)
    op_work: pl.DataFrame = field(default_factory=pl.DataFrame)  # per (op, shape), every row; not in the JSON
    step_verdicts: pl.DataFrame = field(default_factory=pl.DataFrame)  # analysis/regions/step_verdicts.py
    memory: dict[str, Any] = field(default_factory=dict)  # analysis/memory/summary.py; {} without memory events

    def __repr__(self) -> str:
        """A screenful at most: device, diagnostic, verdict per phase, conservation, frame shapes."""
        t = self.totals
        lines = [
            f"AnalysisResult(trace {self.trace.get('id')!r}, device {self.device.get('name')!r}, "
            f"peaks of {self.device.get('hardware')!r})"
        ]
        if self.diagnostic:
            lines.append(f"  {self.diagnostic}")
        rows = [("whole trace", t.get("trace") or {})]
        if self.phases.height and "phase" in self.phases.columns:
            rows += [(str(r.get("phase")), r) for r in self.phases.head(6).to_dicts()]
        for name, r in rows:
            busy = r.get("busy_ns")
            lines.append(
                f"  {name:<12} {r.get('bound') or '-':<10} busy {'-' if busy is None else f'{busy / 1e6:.3f} ms'}"
                f"  {str(r.get('reason') or '')[:90]}"
            )
        lines.append(
            f"  regions analysed {t.get('regions_analyzed')}; device time {t.get('device_time_ns')} ns = attributed "
            f"{t.get('attributed_ns')} + unattributed {t.get('unattributed_ns')} (conserved: {t.get('conserved')})"
        )
        frames = ("regions", "phases", "unattributed", "top_kernels", "top_ops", "latency", "steps", "requests")
        lines.append(
            "  frames: " + ", ".join(f"{f} {getattr(self, f).height}×{getattr(self, f).width}" for f in frames)
        )
        lines += [f"  warning: {w}" for w in self.warnings[:3]]
        return "\n".join(lines)

    def to_json(self) -> AnalysisDoc:
        """The stable JSON document (docs/json.md, version :data:`JSON_VERSION`); its type is the
        contract renderers read (tracekit/analysis/contract/types.py)."""
        doc: AnalysisDoc = clean(self._document())
        return doc

    def to_json_without_regions(self) -> AnalysisDoc:
        """:meth:`to_json` with ``regions`` empty: for a reader of everything else (the diff, which
        reads the regions' columns through :meth:`region_columns`), without a Python object per
        value of every region row."""
        doc: AnalysisDoc = clean(self._document(""))
        doc["regions"] = []
        return doc

    def region_columns(self, columns: tuple[str, ...]) -> pl.DataFrame:
        """Of ``columns``, those the document's region rows hold, with the values they hold there
        (non-finite floats null, as :meth:`to_json` writes them)."""
        reg = self.regions.select([c for c in REGION_JSON_COLUMNS if c in self.regions.columns and c in columns])
        return reg.with_columns(
            pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c, t in reg.schema.items() if t.is_float()
        )

    def to_json_bytes(self) -> bytes:
        """:meth:`to_json` encoded as compact UTF-8 JSON, in one msgspec pass: the same bytes as
        encoding the cleaned document (msgspec writes NaN / inf as null, as the cleaning does),
        without building and decoding it (≈ 1.4 s of 2.9 s on a 40k-region document). The
        cyclic garbage collector is paused meanwhile: the document is millions of new containers
        in trees without cycles, and its passes over them were 0.3–1 s of a 40k-region document."""
        with gc_paused():
            return msgspec.json.encode(self._document(), enc_hook=plain)

    def to_json_parts(self) -> tuple[bytes, bytes, Iterator[bytes]]:
        """:meth:`to_json_bytes` in parts, for a writer that never holds the whole document:
        ``(skeleton, placeholder, chunks)``, the compact document whose ``regions`` array is the
        JSON string ``placeholder`` (given as its compact JSON, quotes included; a random token
        no trace text holds), and the region rows as compact JSON arrays of :data:`ROW_CHUNK`
        rows each, made as they are read. The rows of the arrays, in order, are the elements of
        ``regions`` (tracekit/report/formats/json_print.py ``document_parts`` prints them). The frames are
        read, not copied: the result must not change until the chunks are read."""

        token = f"tracekit:regions:{uuid.uuid4().hex}"
        reg, extra = self._region_frames()
        with gc_paused():
            skeleton = msgspec.json.encode(self._document(token), enc_hook=plain)
        return skeleton, msgspec.json.encode(token), row_chunks(reg, extra)

    def _region_frames(self) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
        """The region columns written to JSON, and the rows of each region's extra fields (its
        top kernels, top ops and idle culprits, keyed by ``scope``), in the order written."""
        culprits = self.idle_culprits
        extra = {
            "top_kernels": self.top_kernels.filter(pl.col("rank") <= TOP_JSON) if self.top_kernels.height else None,
            "top_ops": self.top_ops.filter(pl.col("rank") <= TOP_JSON) if self.top_ops.height else None,
            # per region the top 3 culprits without their sentence (idle_top has the first); phases keep 5
            "idle_culprits": culprits.filter(pl.col("rank") <= 3).drop("text", strict=False)
            if culprits.height
            else None,
        }
        frames = {
            k: df.filter(pl.col("scope_kind") == "region")
            if df is not None and "scope_kind" in df.columns
            else pl.DataFrame(schema={"scope_kind": pl.String(), "scope": pl.String()})
            for k, df in extra.items()
        }
        return self.regions.select([c for c in REGION_JSON_COLUMNS if c in self.regions.columns]), frames

    def _totals(self, lat: list[dict[str, Any]], trace_scope: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
        """The document's totals: the result's, with the whole trace's tops, classes, roofline rows and
        shapes (``trace_scope``: rows by scope of each key), latency by phase, requests, warnings,
        serving and communication."""
        totals = dict(self.totals)
        totals.update({key: rows.get("trace", []) for key, rows in trace_scope.items()})
        totals["latency"] = {
            str(ph): {latency_key(x): strip_keys(x, "metric", "phase") for x in lat if x.get("phase") == ph}
            for ph in dict.fromkeys(x.get("phase") for x in lat)
        }
        totals["requests"] = records(self.requests, list(self.requests.columns))
        totals["warnings"] = list(self.warnings)
        if self.serving:
            totals["serving"] = self.serving
        if self.memory:
            totals["memory"] = self.memory
        totals["communication"] = records(self.communication, list(self.communication.columns))
        return totals

    def _document(self, regions_token: str | None = None) -> dict[str, Any]:
        """The document before NaN / inf become null (see :meth:`to_json`); with
        ``regions_token``, that string in place of the regions (:meth:`to_json_parts`)."""
        regions: Any = regions_token
        if regions_token is None:  # each region row with its top kernels, top ops and idle culprits
            reg, frames = self._region_frames()
            regions = encoded_rows(reg, extra_lists(reg, frames))
        phases = records(self.phases, PHASE_JSON_COLUMNS)
        lat = records(self.latency, list(self.latency.columns))
        byctx = records(self.decode_by_ctx, list(self.decode_by_ctx.columns))
        # the phases and the whole trace keep every row of the top lists (10); regions TOP_JSON
        of_phase = {
            "top_kernels": self.top_kernels,
            "top_ops": self.top_ops,
            "op_classes": self.op_classes,
            "idle_culprits": self.idle_culprits,
            "class_roofline": self.class_roofline,
            "top_shapes": self.shape_roofline,
        }
        of_trace = {k: df for k, df in of_phase.items() if k != "idle_culprits"}
        got = scopes_by_kind(
            [*((df, "phase") for df in of_phase.values()), *((df, "trace") for df in of_trace.values())]
        )
        phase_scope, trace_scope = dict(zip(of_phase, got)), dict(zip(of_trace, got[len(of_phase) :]))
        for p in phases:
            name = str(p["phase"])
            p["latency"] = {latency_key(x): strip_keys(x, "metric") for x in lat if x.get("phase") == name}
            if name == "decode":
                p["step_time_by_ctx"] = byctx
            p.update({key: rows.get(name, []) for key, rows in phase_scope.items()})
            p["step_verdicts"] = step_verdict_summary(self.step_verdicts, name)
        un = self.unattributed
        totals = self._totals(lat, trace_scope)
        return {
            "version": JSON_VERSION,
            "trace": self.trace,
            "device": self.device,
            "diagnostic": self.diagnostic,
            "regions": regions,
            "phases": phases,
            "unattributed": {
                "time_ns": int(un["time_ns"].sum()) if un.height else 0,
                "count": int(un["count"].sum()) if un.height else 0,
                "by_reason": records(un, list(un.columns)),
            },
            "totals": totals,
        }
