"""``AnalysisResult``: the frames an analysis returns, and their stable JSON form (docs/json.md)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec
import polars as pl

from tracekit.analysis.contract import AnalysisDoc
from tracekit.conventions import COST_COLUMNS, CPU_DIAGNOSTIC, PEAK_FRACTION_COLUMNS

__all__ = ["CPU_DIAGNOSTIC", "JSON_VERSION", "AnalysisResult"]

JSON_VERSION = 1

# Region columns written to JSON, in order (docs/json.md). The first block is the contract of
# issue 4 §8; the rest are documented additions.
REGION_JSON_COLUMNS = [
    "name",
    "phase",
    "phase_rule",
    "step",
    "start_ns",
    "end_ns",
    "span_ns",
    "busy_ns",
    "idle_ns",
    "gap_count",
    "kernel_count",
    *COST_COLUMNS,
    "coverage",
    "bound",
    "reason",
    "region_id",
    "parent_id",
    "depth",
    "kind",
    "span_source",
    "cpu_start_ns",
    "cpu_end_ns",
    "cpu_dur_ns",
    "busy_ratio",
    "gap_total_ns",
    "gap_max_ns",
    "kernel_median_ns",
    "device_time_ns",
    "dtype",
    "peak_flops_per_s",
    "peak_bytes_per_s",
    "ridge",
    *PEAK_FRACTION_COLUMNS,
    "batch",
    "ctx",
    "tokens",
    "prefill_tokens",
    "decode_seqs",
    # issue 12: idle time by cause, the top culprit, the dominant op class
    "first_launch_ns",
    "idle_blocking_ns",
    "idle_launch_latency_ns",
    "idle_cpu_op_ns",
    "idle_outside_ops_ns",
    "idle_before_first_launch_ns",
    "idle_after_last_kernel_ns",
    "idle_causes_ns",
    "idle_top",
    "class_top",
]
PHASE_JSON_COLUMNS = [
    "phase",
    "region_count",
    "start_ns",
    "end_ns",
    "span_ns",
    "busy_ns",
    "idle_ns",
    "gap_count",
    "kernel_count",
    *COST_COLUMNS,
    "coverage",
    "bound",
    "reason",
    "busy_ratio",
    "gap_total_ns",
    "gap_max_ns",
    "kernel_median_ns",
    "device_time_ns",
    "dtype",
    "peak_flops_per_s",
    "peak_bytes_per_s",
    "ridge",
    *PEAK_FRACTION_COLUMNS,
    "idle_blocking_ns",
    "idle_launch_latency_ns",
    "idle_cpu_op_ns",
    "idle_outside_ops_ns",
    "idle_before_first_launch_ns",
    "idle_after_last_kernel_ns",
    "idle_causes_ns",
    "idle_top",
    "class_top",
    "launch_delay_count",
    "launch_delay_p50_ns",
    "launch_delay_p99_ns",
    "launch_delay_max_ns",
]
TOP_JSON = 5  # top kernels / ops per region in the JSON (the frames keep 10)


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
    serving: dict[str, Any] = field(default_factory=dict)  # analysis/serving.py: composition, interference, requests
    communication: pl.DataFrame = field(default_factory=pl.DataFrame)  # per phase; tracekit/analysis/comm.py
    idle_culprits: pl.DataFrame = field(default_factory=pl.DataFrame)
    class_roofline: pl.DataFrame = field(default_factory=pl.DataFrame)
    shape_roofline: pl.DataFrame = field(default_factory=pl.DataFrame)

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
        contract renderers read (tracekit/analysis/contract.py)."""
        doc: AnalysisDoc = _clean(self._document())
        return doc

    def to_json_bytes(self) -> bytes:
        """:meth:`to_json` encoded as compact UTF-8 JSON, in one msgspec pass: the same bytes as
        encoding the cleaned document (msgspec writes NaN / inf as null, as the cleaning does),
        without building and decoding it (≈ 1.4 s of 2.9 s on a 40k-region document). The
        cyclic garbage collector is paused meanwhile: the document is millions of new containers
        in trees without cycles, and its passes over them were 0.3–1 s of a 40k-region document."""
        with _gc_paused():
            return msgspec.json.encode(self._document(), enc_hook=_plain)

    def to_json_parts(self) -> tuple[bytes, bytes, Iterator[bytes]]:
        """:meth:`to_json_bytes` in parts, for a writer that never holds the whole document:
        ``(skeleton, placeholder, chunks)``, the compact document whose ``regions`` array is the
        JSON string ``placeholder`` (given as its compact JSON, quotes included; a random token
        no trace text holds), and the region rows as compact JSON arrays of :data:`ROW_CHUNK`
        rows each, made as they are read. The rows of the arrays, in order, are the elements of
        ``regions`` (tracekit/report/jsonout.py ``document_parts`` prints them). The frames are
        read, not copied: the result must not change until the chunks are read."""
        import uuid

        token = f"tracekit:regions:{uuid.uuid4().hex}"
        reg, extra = self._region_frames()
        with _gc_paused():
            skeleton = msgspec.json.encode(self._document(token), enc_hook=_plain)
        return skeleton, msgspec.json.encode(token), _row_chunks(reg, extra)

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

    def _region_rows(self) -> tuple[pl.DataFrame, dict[str, list[Any]]]:
        """The region columns written to JSON and, per row, its top kernels, top ops and idle
        culprits (the extra fields of each region object)."""
        reg, frames = self._region_frames()
        return reg, _extra_lists(reg, frames)

    def _document(self, regions_token: str | None = None) -> dict[str, Any]:
        """The document before NaN / inf become null (see :meth:`to_json`); with
        ``regions_token``, that string in place of the regions (:meth:`to_json_parts`)."""
        regions: Any = regions_token
        if regions_token is None:
            regions = _encoded_rows(*self._region_rows())
        phases = _records(self.phases, PHASE_JSON_COLUMNS)
        lat = _records(self.latency, list(self.latency.columns))
        byctx = _records(self.decode_by_ctx, list(self.decode_by_ctx.columns))
        pk = _tops_by_scope(self.top_kernels, "phase")
        po = _tops_by_scope(self.top_ops, "phase")
        pc = _by_scope(self.op_classes, "phase")
        cul_p = _by_scope(self.idle_culprits, "phase")
        roof_p = _by_scope(self.class_roofline, "phase")
        shape_p = _by_scope(self.shape_roofline, "phase")
        for p in phases:
            name = str(p["phase"])
            p["latency"] = {_lat_key(x): _strip(x, "metric") for x in lat if x.get("phase") == name}
            if name == "decode":
                p["step_time_by_ctx"] = byctx
            p["top_kernels"] = pk.get(name, [])
            p["top_ops"] = po.get(name, [])
            p["op_classes"] = pc.get(name, [])
            p["idle_culprits"] = cul_p.get(name, [])
            p["class_roofline"] = roof_p.get(name, [])
            p["top_shapes"] = shape_p.get(name, [])
        un = self.unattributed
        totals = dict(self.totals)
        totals["top_kernels"] = _tops_by_scope(self.top_kernels, "trace").get("trace", [])
        totals["top_ops"] = _tops_by_scope(self.top_ops, "trace").get("trace", [])
        totals["op_classes"] = _by_scope(self.op_classes, "trace").get("trace", [])
        totals["class_roofline"] = _by_scope(self.class_roofline, "trace").get("trace", [])
        totals["top_shapes"] = _by_scope(self.shape_roofline, "trace").get("trace", [])
        totals["latency"] = {
            str(ph): {_lat_key(x): _strip(x, "metric", "phase") for x in lat if x.get("phase") == ph}
            for ph in dict.fromkeys(x.get("phase") for x in lat)
        }
        totals["requests"] = _records(self.requests, list(self.requests.columns))
        totals["warnings"] = list(self.warnings)
        if self.serving:
            totals["serving"] = self.serving
        totals["communication"] = _records(self.communication, list(self.communication.columns))
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
                "by_reason": _records(un, list(un.columns)),
            },
            "totals": totals,
        }


def _lat_key(row: dict[str, Any]) -> str:
    """``ttft`` for the trace's own numbers, ``ttft_sidecar`` for the runner's wall clock."""
    return str(row["metric"]) if row.get("source") == "trace" else f"{row['metric']}_{row.get('source')}"


def _strip(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def _records(df: pl.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    cols = [c for c in columns if c in df.columns]
    return _dicts(df.select(cols))


def _dicts(df: pl.DataFrame) -> list[dict[str, Any]]:
    """``df.to_dicts()``, built from one Python list per column (the same values; ~30 % faster
    than polars' row tuples on the 69-column region rows of a 40k-region document)."""
    names = df.columns
    return [dict(zip(names, row)) for row in zip(*(s.to_list() for s in df.iter_columns()))]


def _rows(df: pl.DataFrame, extra: dict[str, list[Any]] | None = None, skip: tuple[str, ...] = ()) -> list[Any]:
    """The rows of ``df`` but its ``skip`` columns (then the ``extra`` columns, given as lists) as records that msgspec
    encodes exactly as the dicts of :func:`_dicts` (same keys, same order, same values): instances
    of a Struct made for these columns (fields ``f0, f1, ...`` renamed to the column names, so any
    name works), built positionally and not tracked by the garbage collector — 3× faster to build
    and free than 2.8 M dict entries of a 40k-region document. Read-only: nothing adds keys."""
    cols = {**{c: s.to_list() for c, s in zip(df.columns, df.iter_columns()) if c not in skip}, **(extra or {})}
    names = list(cols)
    fields = [f"f{i}" for i in range(len(names))]
    row = msgspec.defstruct("Row", fields, rename=dict(zip(fields, names)), gc=False)
    return list(map(row, *cols.values())) if names else [row() for _ in range(df.height)]


# region rows turned into Python objects and encoded at a time (_encoded_rows, _row_chunks)
ROW_CHUNK = 1024


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (documents are trees of new containers, no cycles)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _extra_lists(reg: pl.DataFrame, frames: dict[str, pl.DataFrame]) -> dict[str, list[Any]]:
    """Per row of ``reg``, the records of each frame of ``frames`` whose ``scope`` is its region id
    (in the frame's order; ``[]`` for none)."""
    ids = reg["region_id"].to_list() if "region_id" in reg.columns else [None] * reg.height
    keys = [str(i) for i in ids]
    out = {}
    for name, df in frames.items():
        by = _by_scope(df, "region")
        out[name] = [by.get(k, []) for k in keys]
    return out


def _row_chunks(df: pl.DataFrame, extra: dict[str, pl.DataFrame], chunk: int | None = None) -> Iterator[bytes]:
    """The region rows of ``df`` with their ``extra`` records (:meth:`AnalysisResult._region_frames`)
    as compact JSON arrays of ``chunk`` (default :data:`ROW_CHUNK`) rows, each made when it is
    read (none for no rows): the extra records are turned into Python objects for one chunk of
    regions at a time too (the 860 MB replica's top kernels, ops and culprits of 40.7 k regions:
    ~75 MB of Python objects at once)."""
    chunk = chunk or ROW_CHUNK
    enc = msgspec.json.Encoder(enc_hook=_plain)
    ids = df["region_id"].cast(pl.String()) if "region_id" in df.columns else None
    ends = list(range(chunk, df.height + chunk, chunk))
    placed = None
    if ids is not None and ids.null_count() == 0 and ids.n_unique() == ids.len():
        # each frame's rows put once in the order of their region's row (stable: a region's rows
        # keep theirs), so a chunk's rows are one slice, found by a binary search per chunk end
        where = pl.DataFrame({"scope": ids, "_pos": pl.int_range(ids.len(), dtype=pl.Int64(), eager=True)})
        placed = {}
        for k, f in extra.items():
            g = f.join(where, on="scope", how="inner", maintain_order="left").sort("_pos", maintain_order=True)
            cut = g["_pos"].search_sorted(pl.Series(ends, dtype=pl.Int64()), side="left").to_list()
            placed[k] = (g.drop("_pos"), [0, *cut])
    for n, i in enumerate(range(0, df.height, chunk)):
        rows = df.slice(i, chunk)
        if placed is not None:
            mine = {k: g.slice(at[n], at[n + 1] - at[n]) for k, (g, at) in placed.items()}
        elif ids is None:
            mine = {k: f.head(0) for k, f in extra.items()}
        else:
            keys = ids.slice(i, chunk).implode()
            mine = {k: f.filter(pl.col("scope").is_in(keys)) for k, f in extra.items()}
        with _gc_paused():
            part = _rows(rows, _extra_lists(rows, mine))
            out = enc.encode(part)
            del part
        yield out


def _encoded_rows(df: pl.DataFrame, extra: dict[str, list[Any]], chunk: int = ROW_CHUNK) -> msgspec.Raw:
    """The JSON array of :func:`_rows` ``(df, extra)``, encoded ``chunk`` rows at a time into one
    buffer: the same bytes as encoding the whole list (compact JSON: ``[`` rows joined by ``,``
    ``]``), without holding a Python object per value of every row at once (the 860 MB replica's
    40.7 k regions × 72 fields: ~100 MB of Python objects beside the encoded document)."""
    enc = msgspec.json.Encoder(enc_hook=_plain)
    buf = bytearray()
    for i in range(0, df.height, chunk):
        part = _rows(df.slice(i, chunk), {k: v[i : i + chunk] for k, v in extra.items()})
        if buf:
            del buf[-1]  # the "]" of the rows so far: this part's "[" becomes ","
        at = len(buf)
        enc.encode_into(part, buf, at)
        if at:
            buf[at] = ord(",")
        del part
    return msgspec.Raw(memoryview(buf) if buf else b"[]")


def _tops_by_scope(df: pl.DataFrame, kind: str) -> dict[str, list[Any]]:
    return _by_scope(df, kind, pl.col("rank") <= TOP_JSON)


def _by_scope(df: pl.DataFrame, kind: str, keep: pl.Expr | None = None) -> dict[str, list[Any]]:
    """The rows of the scopes of ``kind`` (and ``keep``) as records, by scope (one polars query)."""
    if df.height == 0 or "scope_kind" not in df.columns:
        return {}
    cond = pl.col("scope_kind") == kind
    d = df.filter(cond if keep is None else keep & cond)
    out: dict[str, list[Any]] = {}
    # One conversion for the whole frame: a frame per scope costs ~0.5 ms each, and a trace
    # can have thousands of regions.
    records = _rows(d, skip=("scope_kind", "scope"))
    for scope, record in zip(d["scope"].to_list(), records):
        out.setdefault(str(scope), []).append(record)
    return out


def _clean(x: Any) -> Any:
    """NaN / inf → null, recursively, so the document is strict JSON (keys become strings,
    tuples lists). One msgspec round trip (C; it writes non-finite floats as null): 0.3 s where a
    recursive Python walk took 1–3 s on a 40k-region document."""
    return msgspec.json.decode(msgspec.json.encode(x, enc_hook=_plain))


def _plain(o: Any) -> Any:
    """A value msgspec cannot encode (a Path, ...): its ISO form or its text."""
    return o.isoformat() if hasattr(o, "isoformat") else str(o)
