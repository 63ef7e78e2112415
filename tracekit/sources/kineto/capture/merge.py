"""Graph-capture merge: give the kernels of a CUDA/HIP graph replay the ops that captured them.

A replayed graph shows in a Kineto trace as one ``cudaGraphLaunch``/``hipGraphLaunch`` call whose
correlation every kernel of the replay shares, with no op and no shapes. vLLM and SGLang can
profile the graph *capture* into separate traces (a ``capture_traces/`` folder beside the
trace, listed in its ``execution_details.json``): there every captured kernel launch is a
normal runtime call inside its op, with Input Dims. :func:`merge_captures` matches each replay
to the captured graph it ran and rewrites the replay trace so that every replayed kernel has a
launch and an op of its own — costs, classes and verdicts then flow exactly as for eager ops.

The rule (docs/kineto.md, "Graph replays and capture traces"):

- A **captured graph** is the span between a ``*StreamBeginCapture`` and the next
  ``*StreamEndCapture`` on one thread of a capture trace; its nodes are the kernel launches
  (and memcpy/memset calls) of that thread inside the span, in call order. ROCm traces name the
  kernel on each launch call (``args.kernel``); CUDA traces do not (then nodes are compared by
  kind only and the merge says so).
- A **replay** is the set of device activities sharing a graph launch's correlation, in start
  order. It matches a captured graph when the two node lists are equal (kernel names, or kinds
  when the capture has no names); failing that, when they hold the same names the same number
  of times (concurrent branches reorder start times), nodes pair by (name, occurrence).
  Graphs are keyed as engines key them: a replay's step (the innermost region whose name
  states a key: vLLM's token count ``execute_<tokens>_…``, SGLang/ATOM ``bs=``) replays the graphs
  captured for that key (``execution_details.json`` ``batch_size``, a ``capture_<n>_…`` label,
  ``bs_<n>``), or for the next captured key up (padding). Within a step and capture file, one
  graph with the replay's nodes is its match (by sequence); several identical ones (piecewise
  graphs' middle layers) pair in order: the k-th such replay of the step with the k-th captured
  (by order). Candidates in two files, too few captured, a key above every captured one, or no
  graph with the same nodes: the replay is left as it was and a warning gives the counts and
  the reason — never a guess.
- A match copies the captured ops that are on the path of some node (each node's launching op
  and its ancestors inside the capture span) onto the graph launch's thread, laid out inside the
  graph-launch call in their captured order (their boundaries are ranked and spread evenly, so
  nesting is kept exactly), and adds one zero-length launch per node, named
  ``<graph launch>:node``, whose correlation the replayed kernel now carries. External ids are
  renumbered above the trace's own. The launching region does not change.

Everything the merge did is in ``meta["capture"]`` (files, one row per graph launch: counts,
status, reason) and the tables themselves, so an ingested dataset needs no capture file later.

Here: the merge itself. Finding and reading capture files: ``files.py`` (:func:`discover`);
captured graphs, replays and matching them: ``match.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Sequence

import polars as pl

from tracekit.conventions import GRAPH_NODE_SUFFIX
from tracekit.numbers import count, duration
from tracekit.errors import TracekitError
from tracekit.sources.guard import reading
from tracekit.sources.kineto.capture.files import CAPTURE_DIR, kernel_names, problems
from tracekit.sources.kineto.capture.match import (
    BY_ORDER,
    BY_SEQUENCE,
    captured_graphs,
    imax,
    match,
    replays,
)
from tracekit.tables.intervals import SIBLING_OVERLAP_NS, nest
from tracekit.tables.trace import Trace
from tracekit.sources import load


# ---------------------------------------------------------------- the merge
def merge_captures(trace: Trace, captures: Sequence[str | os.PathLike[str]]) -> Trace:
    """``trace`` with every graph replay that matches a captured graph of ``captures`` given
    captured ops and per-node launches (module docstring). Unmatched replays stay as they were;
    ``meta["capture"]`` records every graph launch and ``meta["warnings"]`` the problems.
    Raises nothing for a capture that does not fit (it maps nothing and says so); a capture file
    that cannot be read raises the loader's one-line error."""

    gl: list[pl.DataFrame] = []
    nl: list[pl.DataFrame] = []
    ol: list[pl.DataFrame] = []
    files: list[Path] = []
    left_out: list[str] = []
    for p in map(Path, captures):
        try:  # a bad capture file is left out (counted, named), never the whole trace refused
            with reading(p):
                cap = load(p, discover_captures=False)
                g, n, o = captured_graphs(cap, kernel_names(p), sum(x.height for x in gl), p)
        except TracekitError as exc:
            left_out.append(str(exc))
            continue
        files.append(p)
        gl.append(g)
        nl.append(n)
        ol.append(o)
    graphs = pl.concat(gl) if gl else pl.DataFrame()
    launches, rnodes = replays(trace)
    meta = dict(trace.meta)
    warnings = list(meta.get("warnings") or [])
    for d in sorted({p.parent for p in map(Path, captures) if p.parent.name == CAPTURE_DIR}):
        warnings += problems(d)
    if left_out:
        more = f"; and {len(left_out) - 3} more" if len(left_out) > 3 else ""
        warnings.append(f"capture: {len(left_out)} capture file(s) left out: {'; '.join(left_out[:3])}{more}")
    if launches.height == 0 or graphs.height == 0:
        meta["capture"] = {"files": [str(p) for p in files], "graphs": graphs.height, "launches": []}
        if files and graphs.height == 0:
            warnings.append(
                f"capture: no graph capture (StreamBeginCapture…EndCapture) in {', '.join(map(str, files))}"
            )
        return Trace(trace.kernels, trace.launches, trace.ops, trace.regions, {**meta, "warnings": warnings})
    m = match(launches, graphs)
    nodes, cops = pl.concat(nl), pl.concat(ol)
    ok = m.filter(pl.col("graph").is_not_null()).sort("start_ns").with_row_index("r")
    out = _apply(trace, ok, nodes, cops, graphs, rnodes)
    # Kernels and device time of each replay, for the counts by pairing.
    per = (
        trace.kernels.filter(pl.col("correlation").is_in(m["correlation"].implode()))
        .group_by("correlation")
        .agg(pl.len().alias("_kn"), (pl.col("end_ns") - pl.col("start_ns")).sum().alias("_ns"))
    )
    m = m.join(per, on="correlation", how="left")
    paired = {
        k: {
            "launches": int(sub.height),
            "kernels": int(sub["_kn"].sum() or 0),
            "ns": int(sub["_ns"].sum() or 0),
        }
        for k, sub in (
            (BY_SEQUENCE, m.filter(pl.col("paired") == BY_SEQUENCE)),
            (BY_ORDER, m.filter(pl.col("paired") == BY_ORDER)),
            ("none", m.filter(pl.col("graph").is_null())),
        )
    }
    bad = m.filter(pl.col("graph").is_null())
    if bad.height or paired[BY_ORDER]["launches"]:
        warnings.append(_pairing_line(m.height, paired, bad))
    meta["capture"] = {
        "files": [str(p) for p in files],
        "graphs": graphs.height,
        "launches": m.select(
            "correlation", "start_ns", "region", "nodes", "batch", "gkey", "graph", "how", "paired", "file", "reason"
        ).to_dicts(),
        "mapped_launches": ok.height,
        "mapped_kernels": int(ok["nodes"].sum() or 0),
        "paired": paired,
    }
    return Trace(out[0], out[1], out[2], trace.regions, {**meta, "warnings": warnings})


def _pairing_line(total: int, paired: dict[str, dict[str, int]], bad: pl.DataFrame) -> str:
    """One warning line: how many replays were paired by node sequence, by capture order, or not at
    all (with kernels and device time), and the first reason a replay was not mapped."""

    words = {
        BY_SEQUENCE: "paired by node sequence",
        BY_ORDER: "paired by capture order among graphs with identical nodes",
        "none": "not mapped",
    }
    parts = [
        f"{p['launches']} {words[k]} ({count(p['kernels'], 'kernel')}, {duration(p['ns'])}"
        + (", left on their graph launch)" if k == "none" else ")")
        for k, p in paired.items()
        if p["launches"]
    ]
    line = f"capture: {count(total, 'graph replay')}: " + ", ".join(parts)
    if bad.height:
        first = bad.sort("start_ns").row(0, named=True)
        line += f"; first not mapped: {first['reason']}"
    return line


def _apply(
    trace: Trace, ok: pl.DataFrame, nodes: pl.DataFrame, cops: pl.DataFrame, graphs: pl.DataFrame, rnodes: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    kernels, launches, ops = trace.kernels, trace.launches, trace.ops
    if ok.height == 0:
        return kernels, launches, ops
    ext_base, corr_base, op_base = id_bases(trace)
    ext_span = max(imax(nodes["cap_ext"]), imax(cops["cap_ext"])) + 1
    lay = _laid_out(ok, graphs)
    at = lambda c: pl.col("start_ns") + (pl.col(c) * pl.col("_step")).floor().cast(pl.Int64)  # noqa: E731
    ext = lambda: pl.when(pl.col("cap_ext").is_not_null()).then(ext_base + pl.col("r") * ext_span + pl.col("cap_ext"))  # noqa: E731
    new_ops = lay.join(cops, on="graph").sort("r", "s_rank", "e_rank", descending=[False, False, True])
    new_ops = new_ops.select(
        pl.lit(trace.trace_id, pl.String).alias("trace_id"),
        (op_base + pl.int_range(pl.len(), dtype=pl.Int64())).alias("op_id"),
        pl.col("name_right").alias("name"),
        "pid",
        "tid",
        at("s_rank").alias("start_ns"),
        at("e_rank").alias("end_ns"),
        ext().alias("external_id"),
        pl.lit(None, pl.Int64).alias("sequence_number"),
        "input_dims",
        "input_types",
        "input_strides",
        "concrete_inputs",
    )
    new_l = lay.join(nodes, on="graph").sort("r", "pos").with_row_index("_k")
    new_l = new_l.with_columns(
        (corr_base + pl.col("_k").cast(pl.Int64)).alias("new_corr"), ext().alias("new_ext"), at("t_rank").alias("t")
    )
    kernels = _remapped(kernels, new_l, rnodes, ok, graphs)
    launches = with_node_launches(launches, new_l, trace.trace_id, "name", "t", "new_corr", "new_ext")
    return kernels, launches, renested(ops, new_ops, ok.select("pid", "tid").unique())


def id_bases(trace: Trace) -> tuple[int, int, int]:
    """The first free External id, correlation and op id of ``trace``: where rows added to it
    (captured ops, per-node launches) number from, so none collides with the trace's own."""
    tables = (trace.kernels, trace.launches, trace.ops, trace.regions)
    ext = max([imax(t["external_id"]) for t in tables if "external_id" in t.columns] + [0]) + 1
    corr = max(imax(trace.kernels["correlation"]), imax(trace.launches["correlation"])) + 1
    return ext, corr, imax(trace.ops["op_id"], -1) + 1


def with_node_launches(
    launches: pl.DataFrame, nodes: pl.DataFrame, trace_id: str, graph: str, t: str, corr: str, ext: str
) -> pl.DataFrame:
    """``launches`` and one zero-length ``<graph launch>:node`` launch per row of ``nodes`` (on the
    graph launch's api and thread, at column ``t``, with correlation ``corr`` and External id
    ``ext``): the launch a replayed kernel re-correlated to it hangs from."""
    add = nodes.select(
        pl.lit(trace_id, pl.String).alias("trace_id"),
        "api",
        (pl.col(graph) + GRAPH_NODE_SUFFIX).alias("name"),
        "pid",
        "tid",
        pl.col(t).alias("start_ns"),
        pl.col(t).alias("end_ns"),
        pl.col(corr).alias("correlation"),
        pl.col(ext).alias("external_id"),
    )
    return pl.concat([launches, add.select(launches.columns)], how="vertical_relaxed")


def _laid_out(ok: pl.DataFrame, graphs: pl.DataFrame) -> pl.DataFrame:
    """The mapped launches with ``_step``: the graph's ranked boundaries spread evenly over the
    graph-launch call (≥ 1 ns apart)."""
    return ok.join(graphs.select("graph", "bounds"), on="graph").select(
        "r",
        "graph",
        "correlation",
        "pid",
        "tid",
        "start_ns",
        "name",
        "api",
        (
            pl.max_horizontal(pl.col("end_ns") - pl.col("start_ns"), pl.col("bounds")).cast(pl.Float64)
            / pl.max_horizontal(pl.col("bounds"), pl.lit(1))
        ).alias("_step"),
    )


def _remapped(
    kernels: pl.DataFrame, new_l: pl.DataFrame, rnodes: pl.DataFrame, ok: pl.DataFrame, graphs: pl.DataFrame
) -> pl.DataFrame:
    """The kernels with each replayed kernel's correlation and External id those of its node's new
    launch: by (key, occurrence); for kind-only graphs by (kind, occurrence)."""
    named = graphs.filter(pl.col("named"))["graph"].implode()
    pair = new_l.select("correlation", "graph", "key", "occ", "new_corr", "new_ext")
    rn = rnodes.filter(pl.col("correlation").is_in(ok["correlation"].implode())).join(
        ok.select("correlation", "graph"), on="correlation"
    )
    by_name = rn.filter(pl.col("graph").is_in(named)).join(pair, on=["correlation", "key", "occ"])
    by_kind = rn.filter(~pl.col("graph").is_in(named)).join(
        pair.rename({"key": "kkey", "occ": "kocc"}), on=["correlation", "kkey", "kocc"]
    )
    mapped = pl.concat([by_name.select("row", "new_corr", "new_ext"), by_kind.select("row", "new_corr", "new_ext")])
    if not mapped.height:
        return kernels
    return kernels.with_columns(
        kernels["correlation"].scatter(mapped["row"], mapped["new_corr"]).alias("correlation"),
        kernels["external_id"].scatter(mapped["row"], mapped["new_ext"]).alias("external_id"),
    )


def renested(ops: pl.DataFrame, new_ops: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """The ops with the captured ops added and the threads that received them nested again (the
    layout keeps the captured nesting exactly)."""
    allops = pl.concat([ops.drop("depth", "parent_id"), new_ops], how="diagonal_relaxed")
    hit = allops.join(threads, on=["pid", "tid"], how="semi")
    nested = nest(hit, ["pid", "tid"], "op_id", sibling_ns=SIBLING_OVERLAP_NS).select("op_id", "depth", "parent_id")
    keep = ops.select("op_id", "depth", "parent_id").join(nested.select("op_id"), on="op_id", how="anti")
    dp = pl.concat([keep, nested], how="vertical_relaxed")
    out = allops.join(dp, on="op_id", how="left", maintain_order="left").select(ops.columns)
    return out.with_columns(pl.col("depth").cast(ops.schema["depth"]))
