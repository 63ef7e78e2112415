"""Before/after comparison of two analysis results: pure functions returning frames.

``delta = b − a`` and ``change = b / a − 1`` (null when a is 0 or either side is missing).
Regions are compared per *kind*: the region name with every number replaced by ``N``
(``tk:decode step=17 batch=4 ctx=530`` → ``tk:decode step=N batch=N ctx=N``), so steps and
batch sizes of two runs line up. Kernels and operators are compared by name over their total
device time (names differ across vendors: an H100 and an MI300X share operator names, not
kernel names). See docs/reports.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from tracekit.analysis.contract.rows import clean
from tracekit.analysis.serving.speculative import METRICS as SPEC_METRICS
from tracekit.analysis.serving.speculative import SCHEMA as SPEC_SCHEMA
from tracekit.conventions import MEASURED_COLUMNS
from tracekit.report.model import ReportData
from tracekit.report.sections.features import rows_of
from tracekit.report.sections.speculative import rows_of as spec_rows

if TYPE_CHECKING:
    from tracekit.report.gate import Gate

METRICS = (
    "span_ns",
    "busy_ns",
    "busy_ratio",
    "idle_ns",
    "gap_count",
    "gap_total_ns",
    "gap_max_ns",
    "kernel_count",
    *MEASURED_COLUMNS,
    "coverage",
)
LAT_PREFIXES = ("ttft_", "tpot_", "itl_", "step_")
# The region columns :func:`region_kinds` reads.
KIND_COLUMNS = ("name", "phase", "span_ns", "busy_ns", "gap_count", "kernel_count", "flops", "bytes")
REGION_METRICS = ("count", "span_ns", "busy_ns", "gap_count", "kernel_count", "flops", "bytes", "span_p50_ns")
TOP_MOVED = 15
KEY_ORDER = {"whole trace": 0, "prefill": 1, "decode": 2, "mixed": 3, "other": 4}


@dataclass(frozen=True)
class Diff:
    """phases / regions: long frames (group, metric, a, b, delta, change); verdicts: phase, bound_a,
    bound_b, changed, reason_a, reason_b; kernels / ops: name, time_a_ns, time_b_ns, delta_ns, change."""

    a_label: str
    b_label: str
    phases: pl.DataFrame
    verdicts: pl.DataFrame
    regions: pl.DataFrame
    kernels: pl.DataFrame
    ops: pl.DataFrame
    diagnostic_a: str | None = None  # the CPU-diagnostic label of a CPU-only side, else None
    diagnostic_b: str | None = None
    features_a: list[Any] = field(default_factory=list)  # each side's feature rows (analysis/features.py)
    features_b: list[Any] = field(default_factory=list)
    gate: Gate | None = None  # with --gate: the CI gate's outcome (report/gate.py)
    speculative: pl.DataFrame = field(default_factory=pl.DataFrame)  # long: draft / verify per phase
    matched: pl.DataFrame = field(default_factory=pl.DataFrame)  # per (op, shape) on both sides (matched_ops)
    unmatched: pl.DataFrame = field(default_factory=pl.DataFrame)  # work on one side only (unmatched_work)
    classes: pl.DataFrame = field(default_factory=pl.DataFrame)  # per op class, whole trace (moved)
    work_totals: dict[str, int] = field(default_factory=dict)  # matched / unmatched device time per side
    layers: pl.DataFrame = field(default_factory=pl.DataFrame)  # long: per layer, time and each role's
    memory: pl.DataFrame = field(default_factory=pl.DataFrame)  # long: device memory per phase (memory_diff)
    identity_a: dict[str, Any] = field(default_factory=dict)  # each side's device, dtype, world size (identity)
    identity_b: dict[str, Any] = field(default_factory=dict)

    def side_lines(self) -> list[str]:
        """``A: base.json (NVIDIA H100 80GB HBM3, bf16)``, one per side: what each run is and ran on."""
        return [
            f"{side}: {label}"
            + (
                f" ({', '.join(str(v) for v in ident.values() if v is not None)})"
                if any(v is not None for v in ident.values())
                else ""
            )
            for side, label, ident in (("A", self.a_label, self.identity_a), ("B", self.b_label, self.identity_b))
        ]

    def diagnostic_lines(self) -> list[str]:
        """One line per CPU-only side, e.g. "A: CPU diagnostic — not GPU evidence"."""
        return [f"{side}: {d}" for side, d in (("A", self.diagnostic_a), ("B", self.diagnostic_b)) if d]

    def to_json(self) -> dict[str, Any]:
        return clean(
            {
                "a": self.a_label,
                "b": self.b_label,
                "identity_a": self.identity_a,
                "identity_b": self.identity_b,
                "diagnostic_a": self.diagnostic_a,
                "diagnostic_b": self.diagnostic_b,
                "phases": self.phases.to_dicts(),
                "verdicts": self.verdicts.to_dicts(),
                "regions": self.regions.to_dicts(),
                "kernels": self.kernels.to_dicts(),
                "ops": self.ops.to_dicts(),
                "speculative": self.speculative.to_dicts(),
                "layers": self.layers.to_dicts(),
                "memory": self.memory.to_dicts(),
                "matched_ops": self.matched.to_dicts(),
                "unmatched_work": self.unmatched.to_dicts(),
                "op_classes": self.classes.to_dicts(),
                "work_totals": self.work_totals,
                "features_a": [dict(r) for r in self.features_a],
                "features_b": [dict(r) for r in self.features_b],
                "gate": self.gate.to_json() if self.gate is not None else None,
            }
        )


def identity(d: ReportData) -> dict[str, Any]:
    """What a run is, beyond its features: the device, the dtype it was judged in, its world size
    (None where the analysis does not say). The gate refuses two runs that differ in any."""
    return {
        "device": d.device.get("name"),
        "dtype": d.whole.get("dtype"),
        "world size": (d.doc.get("trace") or {}).get("world_size"),
    }


def _long(df: pl.DataFrame, key: str, metrics: list[str]) -> pl.DataFrame:
    cols = [m for m in metrics if m in df.columns]
    if df.height == 0 or not cols:
        return pl.DataFrame(schema={key: pl.String, "metric": pl.String, "value": pl.Float64})
    return df.select(pl.col(key).cast(pl.String), *[pl.col(c).cast(pl.Float64) for c in cols]).unpivot(
        index=key, variable_name="metric", value_name="value"
    )


def compare(a: pl.DataFrame, b: pl.DataFrame, key: str, metrics: list[str]) -> pl.DataFrame:
    """Long comparison of two wide frames keyed by ``key``: one row per (key, metric) present in either."""
    la, lb = _long(a, key, metrics), _long(b, key, metrics)
    j = la.join(lb, on=[key, "metric"], how="full", coalesce=True, suffix="_b").rename({"value": "a", "value_b": "b"})
    j = j.filter(pl.col("a").is_not_null() | pl.col("b").is_not_null())  # a metric neither side has
    order = {m: i for i, m in enumerate(metrics)}
    return (
        j.with_columns(
            (pl.col("b") - pl.col("a")).alias("delta"),
            pl.when(pl.col("a") != 0).then(pl.col("b") / pl.col("a") - 1).otherwise(None).alias("change"),
            pl.col("metric").replace_strict(order, default=len(order), return_dtype=pl.Int64).alias("_o"),
            pl.col(key).replace_strict(KEY_ORDER, default=len(KEY_ORDER), return_dtype=pl.Int64).alias("_k"),
        )
        .sort(["_k", "_o"], maintain_order=True)
        .drop("_o", "_k")
    )


def _with_whole(d: ReportData) -> pl.DataFrame:
    """The phases frame plus a "whole trace" row from the totals (so phase-less traces compare too)."""
    w = {k: v for k, v in d.whole.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    whole = pl.DataFrame([{"phase": "whole trace", **{k: float(v) for k, v in w.items()}}])
    ph = d.frame("phases")
    if ph.height == 0 or "phase" not in ph.columns:
        return whole
    num = [c for c in ph.columns if c != "phase" and ph.schema[c].is_numeric()]
    return pl.concat(
        [whole, ph.select(pl.col("phase").cast(pl.String), *[pl.col(c).cast(pl.Float64) for c in num])], how="diagonal"
    )


def phase_diff(a: ReportData, b: ReportData) -> pl.DataFrame:
    """Per phase (and the whole trace): every metric of both sides with its delta and relative change."""
    pa, pb = _with_whole(a), _with_whole(b)
    lat = sorted({c for c in (*pa.columns, *pb.columns) if c.startswith(LAT_PREFIXES)})
    return compare(pa, pb, "phase", [*METRICS, *lat])


def verdict_diff(a: ReportData, b: ReportData) -> pl.DataFrame:
    """Per phase (and the whole trace): verdict before and after, and whether it changed."""

    def side(d: ReportData) -> pl.DataFrame:
        rows = [{"phase": "whole trace", "bound": d.whole.get("bound"), "reason": d.whole.get("reason")}]
        rows += [{k: r.get(k) for k in ("phase", "bound", "reason")} for r in d.rows("phases")]
        return pl.DataFrame(rows, schema={"phase": pl.String, "bound": pl.String, "reason": pl.String}, orient="row")

    j = side(a).join(side(b), on="phase", how="full", coalesce=True, suffix="_b")
    return j.select(
        "phase",
        pl.col("bound").alias("bound_a"),
        pl.col("bound_b"),
        (pl.col("bound").fill_null("–") != pl.col("bound_b").fill_null("–")).alias("changed"),
        pl.col("reason").alias("reason_a"),
        pl.col("reason_b"),
    )


def speculative_diff(a: ReportData, b: ReportData) -> pl.DataFrame:
    """Draft and verify per phase (tracekit/analysis/serving/speculative.py) of both runs, long;
    empty when neither run decodes speculatively."""
    ra, rb = spec_rows(a.totals), spec_rows(b.totals)
    if not ra and not rb:
        return pl.DataFrame()

    def frame(rows: list[Any]) -> pl.DataFrame:
        return pl.DataFrame([{k: r.get(k) for k in SPEC_SCHEMA} for r in rows], schema=SPEC_SCHEMA, orient="row")

    return compare(frame(ra), frame(rb), "phase", SPEC_METRICS)


LAYER_METRICS = ("time_ns", "attention_ns", "mlp_ns", "norm_ns", "communication_ns")


def layer_diff(a: ReportData, b: ReportData) -> pl.DataFrame:
    """Per layer (tracekit/analysis/layers.py): its time and each role's, both runs, long; empty
    unless both runs have layers."""
    fa, fb = (pl.DataFrame((d.totals.get("layers") or {}).get("per_layer") or []) for d in (a, b))
    if fa.height == 0 or fb.height == 0:
        return pl.DataFrame()
    key = pl.format("layer {}", pl.col("layer"))
    return compare(
        fa.with_columns(key.alias("layer")), fb.with_columns(key.alias("layer")), "layer", list(LAYER_METRICS)
    )


MEMORY_METRICS = (
    "peak_allocated_bytes",
    "reserved_peak_bytes",
    "allocated_end_bytes",
    "growth_per_step_bytes",
    "growth_per_token_bytes",
)


def memory_frame(totals: dict[str, Any]) -> pl.DataFrame:
    """A run's device memory per phase (tracekit/analysis/memory/summary.py), with the whole trace's
    peak as the ``whole trace`` row; empty without memory events."""
    m = totals.get("memory") or {}
    peak = m.get("peak") or {}
    rows = [{"phase": str(r.get("phase")), **{k: r.get(k) for k in MEMORY_METRICS}} for r in m.get("phases") or []]
    if peak:
        whole = {
            "peak_allocated_bytes": peak.get("allocated_bytes"),
            "reserved_peak_bytes": peak.get("reserved_peak_bytes"),
        }
        rows.insert(0, {"phase": "whole trace", **{k: whole.get(k) for k in MEMORY_METRICS}})
    schema = {"phase": pl.String(), **{k: pl.Float64() for k in MEMORY_METRICS}}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def memory_diff(a: ReportData, b: ReportData) -> pl.DataFrame:
    """Device memory per phase of both runs, long (peak, reserved, growth per step and token);
    empty unless a run carries memory events."""
    fa, fb = memory_frame(a.totals), memory_frame(b.totals)
    if fa.height == 0 and fb.height == 0:
        return pl.DataFrame()
    return compare(fa, fb, "phase", list(MEMORY_METRICS))


def region_kinds(regions: pl.DataFrame) -> pl.DataFrame:
    """Regions aggregated per kind (name with numbers → N) and phase: count and summed metrics."""
    if regions.height == 0 or "name" not in regions.columns:
        return pl.DataFrame(schema={"kind": pl.String})
    r = regions.with_columns(pl.col("name").cast(pl.String).str.replace_all(r"\d+", "N").alias("_k"))
    ph = pl.col("phase").cast(pl.String) if "phase" in r.columns else pl.lit("other")
    r = r.with_columns(pl.format("{} [{}]", pl.col("_k"), ph).alias("kind"))
    summed = [pl.col(m).cast(pl.Float64).sum() for m in KIND_COLUMNS[2:] if m in r.columns]  # span_ns … bytes
    aggs = [pl.len().cast(pl.Float64).alias("count"), *summed]
    if "span_ns" in r.columns:
        aggs.append(pl.col("span_ns").cast(pl.Float64).median().alias("span_p50_ns"))
    return r.group_by("kind", maintain_order=True).agg(aggs)


def region_diff(a: ReportData, b: ReportData) -> pl.DataFrame:
    ka, kb = (region_kinds(d.frame("regions", KIND_COLUMNS)) for d in (a, b))
    return compare(ka, kb, "kind", list(REGION_METRICS))


def name_totals(df: pl.DataFrame, name: str = "name", time: str = "dur_ns") -> pl.DataFrame:
    """``name, count, time_ns`` summed over rows (kernels table: time = end − start)."""
    if df.height == 0:
        return pl.DataFrame(schema={"name": pl.String, "count": pl.Int64, "time_ns": pl.Int64})
    t = pl.col(time) if time in df.columns else (pl.col("end_ns") - pl.col("start_ns"))
    return df.group_by(pl.col(name).cast(pl.String).alias("name")).agg(
        pl.len().cast(pl.Int64).alias("count"), t.sum().cast(pl.Int64).alias("time_ns")
    )


def moved(a: pl.DataFrame, b: pl.DataFrame, n: int = TOP_MOVED) -> pl.DataFrame:
    """Names whose total device time moved most (by |delta|); absent on one side counts as 0."""
    j = a.join(b, on="name", how="full", coalesce=True, suffix="_b")
    return (
        j.select(
            "name",
            pl.col("count").fill_null(0).alias("count_a"),
            pl.col("count_b").fill_null(0),
            pl.col("time_ns").fill_null(0).alias("time_a_ns"),
            pl.col("time_ns_b").fill_null(0).alias("time_b_ns"),
        )
        .with_columns((pl.col("time_b_ns") - pl.col("time_a_ns")).alias("delta_ns"))
        .with_columns(
            pl.when(pl.col("time_a_ns") > 0)
            .then(pl.col("time_b_ns") / pl.col("time_a_ns") - 1)
            .otherwise(None)
            .alias("change")
        )
        .sort([pl.col("delta_ns").abs(), "name"], descending=[True, False])
        .head(n)
    )


def top_totals(d: ReportData, name: Literal["trace_top_kernels", "trace_top_ops"]) -> pl.DataFrame:
    """Whole-trace totals from a report's top-N list of the whole trace."""
    t = d.frame(name)
    if t.height == 0 or "name" not in t.columns:
        return name_totals(pl.DataFrame())
    tcol = "device_time_ns" if "device_time_ns" in t.columns else "time_ns"
    return t.select(
        pl.col("name").cast(pl.String), pl.col("count").cast(pl.Int64), pl.col(tcol).cast(pl.Int64).alias("time_ns")
    )


def _work_key(w: pl.DataFrame) -> pl.DataFrame:
    return w.select("op", "shape", "op_class", "count", pl.col("device_time_ns").alias("time_ns"), "kernel")


def matched_ops(a: pl.DataFrame, b: pl.DataFrame, n: int = TOP_MOVED) -> pl.DataFrame:
    """Work matched through its operator and input shapes (tracekit/analysis/op_work.py) on both
    sides, whatever the kernels' names: op, shape, op_class, count and time of each side, delta,
    change, and the kernel that did most of it on each side; the ``n`` with the largest |delta|.
    Work without an operator is matched only by kernel name."""
    if a.height == 0 or b.height == 0:
        return pl.DataFrame()
    j = _work_key(a).join(_work_key(b), on=["op", "shape"], how="inner", suffix="_b")
    return (
        j.select(
            "op",
            "shape",
            "op_class",
            pl.col("count").alias("count_a"),
            "count_b",
            pl.col("time_ns").alias("time_a_ns"),
            pl.col("time_ns_b").alias("time_b_ns"),
            (pl.col("time_ns_b") - pl.col("time_ns")).alias("delta_ns"),
            pl.when(pl.col("time_ns") > 0).then(pl.col("time_ns_b") / pl.col("time_ns") - 1).alias("change"),
            pl.col("kernel").alias("kernel_a"),
            "kernel_b",
        )
        .sort([pl.col("delta_ns").abs(), "op", "shape"], descending=[True, False, False])
        .head(n)
    )


def unmatched_work(a: pl.DataFrame, b: pl.DataFrame, n: int = TOP_MOVED) -> pl.DataFrame:
    """Work on one side only (no (op, shape) of the other side matches it): side (``A only`` /
    ``B only``), op, shape (the kernel's name for work without an operator), op_class, count,
    time_ns; the ``n`` largest of each side."""
    if a.height == 0 and b.height == 0:
        return pl.DataFrame()
    ka, kb = _work_key(a), _work_key(b)
    only_a = ka.join(kb.select("op", "shape"), on=["op", "shape"], how="anti").with_columns(
        pl.lit("A only").alias("side")
    )
    only_b = kb.join(ka.select("op", "shape"), on=["op", "shape"], how="anti").with_columns(
        pl.lit("B only").alias("side")
    )
    return pl.concat(
        [x.sort(["time_ns", "op", "shape"], descending=[True, False, False]).head(n) for x in (only_a, only_b)]
    ).select("side", "op", "shape", "op_class", "count", "time_ns", "kernel")


def work_totals(a: pl.DataFrame, b: pl.DataFrame) -> dict[str, int]:
    """Device time matched through (op, shape) and left on one side, for each side."""
    if a.height == 0 or b.height == 0:
        return {}
    ka, kb = _work_key(a), _work_key(b)
    keys = ka.select("op", "shape").join(kb.select("op", "shape"), on=["op", "shape"], how="inner")
    ma = int(ka.join(keys, on=["op", "shape"], how="semi")["time_ns"].sum())
    mb = int(kb.join(keys, on=["op", "shape"], how="semi")["time_ns"].sum())
    return {
        "matched_a_ns": ma,
        "matched_b_ns": mb,
        "unmatched_a_ns": int(ka["time_ns"].sum()) - ma,
        "unmatched_b_ns": int(kb["time_ns"].sum()) - mb,
    }


def class_totals(op_classes: pl.DataFrame) -> pl.DataFrame:
    """``name`` (the op class), count, time_ns over the whole trace, from a result's op_classes."""
    if op_classes.height == 0 or "scope_kind" not in op_classes.columns:
        return name_totals(pl.DataFrame())
    t = op_classes.filter(pl.col("scope_kind") == "trace")
    return t.select(
        pl.col("op_class").cast(pl.String).alias("name"),
        pl.col("count").cast(pl.Int64),
        pl.col("device_time_ns").cast(pl.Int64).alias("time_ns"),
    )


def diff(
    a: ReportData,
    b: ReportData,
    kernels: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    ops: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    labels: tuple[str, str] = ("A", "B"),
    work: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    classes: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    kinds: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> Diff:
    """Compare two reports. ``kernels`` / ``ops``: per-name totals of each side (``name_totals``);
    without them the results' own top-N lists are compared (names outside a top-N count as 0).
    ``work``: each side's per-(op, shape) work (``AnalysisResult.op_work``), matched across kernel
    families; ``classes``: each side's ``AnalysisResult.op_classes``; ``kinds``: each side's
    :func:`region_kinds`, made before (the reports may then leave their region rows out)."""
    ka, kb = (
        kernels if kernels is not None else (top_totals(a, "trace_top_kernels"), top_totals(b, "trace_top_kernels"))
    )
    oa, ob = ops if ops is not None else (top_totals(a, "trace_top_ops"), top_totals(b, "trace_top_ops"))
    return Diff(
        a_label=labels[0],
        b_label=labels[1],
        phases=phase_diff(a, b),
        verdicts=verdict_diff(a, b),
        regions=compare(*kinds, "kind", list(REGION_METRICS)) if kinds is not None else region_diff(a, b),
        kernels=moved(ka, kb),
        ops=moved(oa, ob),
        diagnostic_a=a.diagnostic,
        diagnostic_b=b.diagnostic,
        speculative=speculative_diff(a, b),
        layers=layer_diff(a, b),
        memory=memory_diff(a, b),
        matched=matched_ops(*work) if work is not None else pl.DataFrame(),
        unmatched=unmatched_work(*work) if work is not None else pl.DataFrame(),
        classes=moved(class_totals(classes[0]), class_totals(classes[1]), n=100)
        if classes is not None
        else pl.DataFrame(),
        work_totals=work_totals(*work) if work is not None else {},
        features_a=list(rows_of(a.totals)),
        features_b=list(rows_of(b.totals)),
        identity_a=identity(a),
        identity_b=identity(b),
    )
