"""Graph-node annotations: give the kernels of a CUDA graph replay the ops recorded at capture
time, keyed by each kernel's graph node id — without a capture trace (issue 39 item 3; docs/kineto.md,
"Graph node annotations").

Recent PyTorch records, on every kernel a graph replay runs, the node's tools id as
``args["graph node id"]`` (Kineto) — ``(graph id << 32) | node`` from ``cudaGraphNodeGetToolsId``,
CUDA ≥ 13.1 — and Nsight stores the same id as ``graphNodeId`` when run with
``--cuda-graph-trace=node``. At capture time, ``torch.cuda._graph_annotations.mark_kernels(…)``
scopes record annotations per node: a JSON object ``{"<tools id>": [annotation, …]}`` whose
annotations are dicts (the outer scope first; an inner scope wins the keys both hold), a legacy
``{"str": text}`` or a bare string (both read as ``{"name": text}``). The keys read here:

- ``op``: the op that launched the node (``aten::mm``); else ``name`` when it holds ``::``;
- ``Input Dims`` / ``input_dims``, ``Input type`` / ``input_types``, ``Concrete Inputs`` /
  ``concrete_inputs``: the op's arguments as the profiler writes them for an eager op.

Other keys (a module path such as ``module_fqn``, a collective's sizes) only tell two annotations
apart: they name no op.

:func:`apply` turns each run of consecutive kernels of one replay with the same annotation into
one op (one op that launched several kernels is priced once), laid out inside the graph-launch
call on its thread, with one zero-length ``<graph launch>:node`` launch per kernel whose
correlation the kernel then carries — the layout the capture merge uses
(:mod:`tracekit.sources.kineto.capture.merge`), so costs, classes and verdicts flow as for eager
ops. A kernel with an id the file does not hold, or annotated without an op, stays on its graph
launch; an entry that is no tools id or holds no annotation is left out; the counts are in
``meta["node_annotations"]`` and a warning.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Final

import polars as pl

from tracekit.errors import TraceFormatError
from tracekit.inputs import open_input, read_json
from tracekit.numbers import count
from tracekit.sources.kineto.capture.merge import id_bases, renested, with_node_launches
from tracekit.tables.trace import Trace

MAX_BYTES: Final = 256 * 1024 * 1024  # an annotation file of a whole model is a few MB
_HEAD: Final = re.compile(rb'^\s*\{\s*(\}|"\d+"\s*:)')
_KEYS: Final = {
    "input_dims": ("Input Dims", "input_dims"),
    "input_types": ("Input type", "input_types"),
    "concrete_inputs": ("Concrete Inputs", "concrete_inputs"),
}


def is_annotation_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a node-annotation file (a JSON object keyed by integer tools ids), not
    a trace: its first bytes decide (a Kineto trace opens with ``"schemaVersion"`` or
    ``"traceEvents"``)."""
    try:
        with open_input(path) as fh:
            head = fh.read(256)
    except OSError:
        return False
    return bool(_HEAD.match(head))


def read(path: str | os.PathLike[str]) -> tuple[pl.DataFrame, int]:
    """The annotations of ``path``, one row per node — ``node_id``, ``op``, ``input_dims`` (JSON
    text), ``input_types`` and ``concrete_inputs`` (lists of strings), as the Kineto reader stores
    them, and ``key`` (the merged annotation as JSON: equal keys = one op) — and the number of
    entries left out (a key that is no tools id, or no readable annotation)."""
    doc = read_json(path, "graph-node annotation file", TraceFormatError, MAX_BYTES)
    if not isinstance(doc, dict):
        raise TraceFormatError(f"{path}: graph-node annotation file is not a JSON object of tools ids")
    rows: dict[str, list[Any]] = {c: [] for c in ("node_id", "op", *_KEYS, "key")}
    bad = 0
    for k, scopes in doc.items():
        merged = _merged(scopes)
        if not k.isdigit() or int(k) >= 1 << 63 or merged is None:  # tools ids: unsigned, stored as Int64
            bad += 1
            continue
        name = merged.get("name")
        op = merged.get("op") or (name if isinstance(name, str) and "::" in name else None)
        rows["node_id"].append(int(k))
        rows["op"].append(str(op) if op is not None else None)
        for col, names in _KEYS.items():
            v = next((merged[n] for n in names if n in merged), None)
            if col == "input_dims":  # JSON text, as the Kineto reader keeps it
                rows[col].append(json.dumps(v) if v is not None else None)
            else:  # a list of strings
                rows[col].append([str(x) for x in v] if isinstance(v, list) else None)
        rows["key"].append(json.dumps(merged, sort_keys=True, default=str))
    schema = {c: pl.String() for c in rows} | {
        "node_id": pl.Int64(),
        "input_types": pl.List(pl.String()),
        "concrete_inputs": pl.List(pl.String()),
    }
    return pl.DataFrame(rows, schema=schema).unique("node_id", keep="first", maintain_order=True), bad


def _merged(scopes: Any) -> dict[str, Any] | None:
    """One node's annotation scopes merged (outer first, inner wins); None when none is readable."""
    if not isinstance(scopes, list):
        scopes = [scopes]
    out: dict[str, Any] = {}
    for a in scopes:
        if isinstance(a, str):
            a = {"name": a}
        elif isinstance(a, dict) and "str" in a and "name" not in a:
            a = {"name": a["str"], **{k: v for k, v in a.items() if k != "str"}}
        if isinstance(a, dict):
            out.update(a)
    return out or None


def apply(trace: Trace, path: str | os.PathLike[str]) -> Trace:
    """``trace`` with the annotated kernels of its graph replays given ops and per-node launches
    (module docstring); ``meta["node_annotations"]`` says what was mapped."""
    ann, bad = read(path)
    k = trace.kernels.with_row_index("_row")
    if "graph_node_id" not in k.columns:
        k = k.with_columns(pl.lit(None, pl.Int64).alias("graph_node_id"))
    graph_kernels = k.filter(pl.col("graph_node_id").is_not_null())
    gl = trace.launches.select(
        "correlation", "api", pl.col("name").alias("_gname"), "pid", "tid", "start_ns", "end_ns"
    ).unique("correlation", keep="first")
    hits = (
        graph_kernels.select("_row", "correlation", "graph_node_id", pl.col("start_ns").alias("_ks"))
        .join(ann.filter(pl.col("op").is_not_null()), left_on="graph_node_id", right_on="node_id")
        .join(gl, on="correlation")
        .sort("correlation", "_ks", "_row")
    )
    info: dict[str, Any] = {
        "file": str(Path(path)),
        "annotated_nodes": ann.height,
        "graph_kernels": graph_kernels.height,
        "mapped_kernels": hits.height,
        "left_out_entries": bad,
    }
    meta = {**trace.meta, "node_annotations": info}

    def warn(text: str) -> None:
        meta["warnings"] = [*(meta.get("warnings") or []), f"graph-node annotations {Path(path).name}: {text}"]

    if bad:
        warn(f"{count(bad, 'entry', 'entries')} left out (a key that is no tools id, or no readable annotation)")
    unmapped = graph_kernels.height - hits.height
    if unmapped:
        ids = graph_kernels.join(hits.select("_row"), on="_row", how="anti")["graph_node_id"].head(1).to_list()
        warn(
            f"{count(unmapped, 'graph kernel')} of {graph_kernels.height} not mapped (no annotation with an op "
            f"for their node id, e.g. {ids[0]}, or no graph launch with their correlation): left on their graph launch"
        )
    if hits.height == 0:
        info["ops"] = 0
        return Trace(trace.kernels, trace.launches, trace.ops, trace.regions, meta)
    kernels, launches, ops, n_ops = _rewrite(trace, hits)
    info["ops"] = n_ops
    warn(
        f"{hits.height} of {count(graph_kernels.height, 'graph kernel')} given {count(n_ops, 'op')} with their "
        "shapes (costs from the ops, not estimated)"
    )
    return Trace(kernels, launches, ops, trace.regions, meta)


def _rewrite(trace: Trace, hits: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """The new ops (one per run of equal annotations within a replay), the per-kernel launches and
    the kernels re-correlated; each replay's ops spread evenly over its graph-launch call (≥ 1 ns
    apart): op i spans slots 3i … 3i+2, its kernels' launches sit at slot 3i+1."""
    kernels, launches, ops = trace.kernels, trace.launches, trace.ops
    ext_base, corr_base, op_base = id_bases(trace)
    h = hits.with_columns(
        (pl.col("key") != pl.col("key").shift(1).over("correlation")).fill_null(True).alias("_new")
    ).with_columns(
        (pl.col("_new").cum_sum().over("correlation") - 1).alias("_i"),
        pl.col("_new").sum().over("correlation").alias("_n"),
        (pl.col("_new").cum_sum() - 1).alias("_g"),  # the op's index over all replays
        pl.int_range(pl.len(), dtype=pl.Int64()).alias("_k"),
    )
    step = pl.max_horizontal(pl.col("end_ns") - pl.col("start_ns"), 3 * pl.col("_n")).cast(pl.Float64) / (
        3 * pl.col("_n")
    )
    at = lambda slot: pl.col("start_ns") + (slot * step).floor().cast(pl.Int64)  # noqa: E731
    h = h.with_columns(
        at(3 * pl.col("_i")).alias("_os"),
        at(3 * pl.col("_i") + 2).alias("_oe"),
        at(3 * pl.col("_i") + 1).alias("_t"),
        (ext_base + pl.col("_g")).cast(pl.Int64).alias("_ext"),
        (corr_base + pl.col("_k")).cast(pl.Int64).alias("_corr"),
    )
    first = h.filter(pl.col("_new"))
    new_ops = first.select(
        pl.lit(trace.trace_id, pl.String).alias("trace_id"),
        (op_base + pl.col("_g")).cast(pl.Int64).alias("op_id"),
        pl.col("op").alias("name"),
        "pid",
        "tid",
        pl.col("_os").alias("start_ns"),
        pl.col("_oe").alias("end_ns"),
        pl.col("_ext").alias("external_id"),
        pl.lit(None, pl.Int64).alias("sequence_number"),
        "input_dims",
        "input_types",
        pl.lit(None, pl.String).alias("input_strides"),
        "concrete_inputs",
    )
    rows = h["_row"].cast(pl.Int64)
    kernels = kernels.with_columns(
        kernels["correlation"].scatter(rows, h["_corr"]).alias("correlation"),
        *(
            [kernels["external_id"].scatter(rows, h["_ext"]).alias("external_id")]
            if "external_id" in kernels.columns
            else []
        ),
    )
    launches = with_node_launches(launches, h, trace.trace_id, "_gname", "_t", "_corr", "_ext")
    ops = renested(ops, new_ops, first.select("pid", "tid").unique())
    return kernels, launches, ops, first.height
