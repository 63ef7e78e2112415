"""Graph-capture merge, stage one: the captured graphs of a capture trace, the graph replays of a
trace, and which captured graph each replay ran (the rule is in the docstring of
:mod:`tracekit.sources.kineto.capture.merge`, which applies the matches).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import polars as pl

from tracekit.sources.kineto.capture.files import batch_of_file, mode_of_file
from tracekit.conventions import GRAPH_LAUNCH_PREFIX_RE
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.trace import Trace
from tracekit.tables.cases import first

_BEGIN_RE: Final = r"^(cuda|hip|cu)StreamBeginCapture"
_END_RE: Final = r"^(cuda|hip|cu)StreamEndCapture"
_KERNEL_CALL_RE: Final = r"(?i)launch(kernel|cooperative)|^cuLaunch|ModuleLaunch"

# The graph key a step name states, first pattern that matches (docs/kineto.md, "Graph replays"):
# vLLM keys its graphs by the step's token count (detailed form: the leading number; native form:
# the context and generation parts' first integers added), SGLang and ATOM by batch size (``bs=``,
# ATOM's padded ``bs=real/padded``), a capture label ``capture_<n>_…`` by its number.
_VLLM_DETAILED_KEY: Final = r"^execute_(\d+)_context_\d+\("
_VLLM_NATIVE_KEY: Final = r"^execute_context_\d+\((\d+)[^)]*\)_generation_\d+\((\d+)"
_BS_KEY: Final = r"\bbs=(\d+)(?:/(\d+))?"
CAPTURE_LABEL_RE: Final = r"^capture_(\d+)_"
_DRAFT_LABEL_RE: Final = r"^capture_\d+_draft_"


def graph_key(name: pl.Expr) -> pl.Expr:
    """The key a region name gives the graphs it replays (or, for a ``capture_<n>_…`` label, the
    graph it captured): vLLM steps' token count, SGLang/ATOM ``bs=`` (the padded one of
    ``bs=117/128``), else null."""
    i = lambda pat, g: name.str.extract(pat, g).cast(pl.Int64, strict=False)  # noqa: E731
    return pl.coalesce(
        i(_VLLM_DETAILED_KEY, 1),
        i(_VLLM_NATIVE_KEY, 1) + i(_VLLM_NATIVE_KEY, 2),
        i(_BS_KEY, 2),
        i(_BS_KEY, 1),
        i(CAPTURE_LABEL_RE, 1),
    )


# ---------------------------------------------------------------- captured graphs
_NODE_SCHEMA: Final = {
    "graph": pl.Int64(),
    "pos": pl.Int64(),
    "key": pl.String(),
    "occ": pl.Int64(),
    "t_rank": pl.Int64(),
    "cap_ext": pl.Int64(),
}
_OP_SCHEMA: Final = {
    "graph": pl.Int64(),
    "name": pl.String(),
    "s_rank": pl.Int64(),
    "e_rank": pl.Int64(),
    "cap_ext": pl.Int64(),
    "input_dims": pl.String(),
    "input_types": pl.List(pl.String()),
    "input_strides": pl.String(),
    "concrete_inputs": pl.List(pl.String()),
}


def captured_graphs(
    capture: Trace, names: pl.DataFrame, first_graph: int, path: Path
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(graphs, nodes, ops) of one capture trace. ``graphs``: graph, file, batch, nodes, named,
    sig (hash of the node keys in order), msig (order-free hash). ``nodes``: one row per node
    (key = kernel name, or ``kernel``/``memcpy``/``memset`` when unnamed; occ = occurrence of the
    key; t_rank = rank of its call time among the graph's boundaries). ``ops``: the captured ops
    on some node's path, with ranked start/end."""
    la = capture.launches
    listed, named_bs, mode = batch_of_file(path, listed_only=True), batch_of_file(path), mode_of_file(path)
    regions = capture.regions.filter(pl.col("name").str.contains(CAPTURE_LABEL_RE))
    gl, nl, ol = [], [], []
    for i, (pid, tid, t0, t1) in enumerate(sorted(_capture_windows(la), key=lambda w: w[2])):
        g = first_graph + i
        calls = la.filter((pl.col("pid") == pid) & (pl.col("tid") == tid) & pl.col("start_ns").is_between(t0, t1))
        nodes, named = _graph_nodes(calls.join(names, on="correlation", how="left"))
        wops = _ops_on_paths(capture.ops, nodes, pid, tid, t0, t1)
        bounds = pl.concat([wops["start_ns"], wops["end_ns"], nodes["start_ns"]]).unique().sort()
        rank = {v: k for k, v in enumerate(bounds.to_list())}
        batch, draft = _graph_key(regions, t0, listed, named_bs)
        keys = nodes["key"]
        gl.append(
            {
                "graph": g,
                "file": str(path),
                "batch": batch,
                "mode": mode,
                "draft": draft,
                "nodes": nodes.height,
                "named": named,
                "bounds": len(rank),
                "sig": _seq_sig(keys),
                "msig": int(keys.hash(11).sum() or 0),  # order-free
            }
        )
        nl.append(_node_rows(g, nodes, rank))
        ol.append(_op_rows(g, wops, rank))
    graphs = pl.DataFrame(gl, schema=_GRAPH_SCHEMA)
    nodes_all = pl.concat(nl) if nl else pl.DataFrame(schema=_NODE_SCHEMA)
    ops_all = pl.concat(ol) if ol else pl.DataFrame(schema=_OP_SCHEMA)
    return graphs, nodes_all, ops_all


def _node_rows(g: int, nodes: pl.DataFrame, rank: dict[int, int]) -> pl.DataFrame:
    """One row per node of graph ``g``: position, key, rank of its call time, External id, occurrence."""
    return (
        pl.DataFrame(
            {
                "graph": g,
                "pos": pl.int_range(nodes.height, eager=True, dtype=pl.Int64()),
                "key": nodes["key"],
                "t_rank": nodes["start_ns"].replace_strict(rank, return_dtype=pl.Int64()),
                "cap_ext": nodes["external_id"],
            }
        )
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64()).over("key").alias("occ"))
        .select(list(_NODE_SCHEMA))
    )


def _op_rows(g: int, wops: pl.DataFrame, rank: dict[int, int]) -> pl.DataFrame:
    """The captured ops of graph ``g`` with their ranked start and end and their shapes."""
    return wops.select(
        pl.lit(g, pl.Int64).alias("graph"),
        "name",
        pl.col("start_ns").replace_strict(rank, return_dtype=pl.Int64()).alias("s_rank"),
        pl.col("end_ns").replace_strict(rank, return_dtype=pl.Int64()).alias("e_rank"),
        pl.col("external_id").alias("cap_ext"),
        "input_dims",
        "input_types",
        "input_strides",
        "concrete_inputs",
    )


_GRAPH_SCHEMA = {
    "graph": pl.Int64(),
    "file": pl.String(),
    "batch": pl.Int64(),
    "mode": pl.String(),
    "draft": pl.Boolean(),
    "nodes": pl.Int64(),
    "named": pl.Boolean(),
    "bounds": pl.Int64(),
    "sig": pl.UInt64(),
    "msig": pl.UInt64(),
}


def _capture_windows(la: pl.DataFrame) -> list[tuple[int, int, int, int]]:
    """(pid, tid, start, end) of each capture: a ``*StreamBeginCapture`` to the next
    ``*StreamEndCapture`` on its thread; one never ended runs to the end of the trace."""
    marks = la.filter(pl.col("name").str.contains(_BEGIN_RE) | pl.col("name").str.contains(_END_RE)).sort("start_ns")
    windows: list[tuple[int, int, int, int]] = []
    open_: dict[tuple[int, int], int] = {}
    for pid, tid, nm, s, e in marks.select("pid", "tid", "name", "start_ns", "end_ns").iter_rows():
        if re.search(_BEGIN_RE, nm):
            open_[(pid, tid)] = s
        elif (pid, tid) in open_:
            windows.append((pid, tid, open_.pop((pid, tid)), e))
    end_all = imax(la["end_ns"])
    return windows + [(p, t, s, end_all) for (p, t), s in open_.items()]


def _graph_nodes(calls: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """The graph's nodes in call order (its kernel launches, memcpy and memset calls), each with its
    ``key`` (the kernel name when every kernel call names one, else the kind), and whether named."""
    kind = first(
        (pl.col("kernel").is_not_null() | pl.col("name").str.contains(_KERNEL_CALL_RE), pl.lit("kernel")),
        (pl.col("name").str.contains("(?i)memcpy"), pl.lit("memcpy")),
        (pl.col("name").str.contains("(?i)memset"), pl.lit("memset")),
    )
    nodes = calls.with_columns(kind.alias("_kind")).filter(pl.col("_kind").is_not_null()).sort("start_ns")
    named = bool(nodes.height) and nodes.filter(pl.col("_kind") == "kernel")["kernel"].null_count() == 0
    return nodes.with_columns(
        pl.coalesce("kernel", "_kind").alias("key") if named else pl.col("_kind").alias("key")
    ), named


def _ops_on_paths(ops: pl.DataFrame, nodes: pl.DataFrame, pid: int, tid: int, t0: int, t1: int) -> pl.DataFrame:
    """Ops on some node's path: the op named by the launch's External id (on this thread, inside the
    span), and its ancestors inside the span; by start, the enclosing first."""
    wops = ops.filter(
        (pl.col("pid") == pid) & (pl.col("tid") == tid) & (pl.col("start_ns") >= t0) & (pl.col("end_ns") <= t1)
    )
    keep = set(wops.filter(pl.col("external_id").is_in(nodes["external_id"].drop_nulls().implode()))["op_id"].to_list())
    parent = dict(zip(wops["op_id"].to_list(), wops["parent_id"].to_list()))
    frontier = set(keep)
    while frontier:
        frontier = {parent[o] for o in frontier if parent.get(o) in parent} - keep
        keep |= frontier
    return wops.filter(pl.col("op_id").is_in(sorted(keep))).sort("start_ns", pl.col("end_ns"), descending=[False, True])


def _graph_key(regions: pl.DataFrame, t0: int, listed: int | None, named_bs: int | None) -> tuple[int | None, bool]:
    """(batch key, draft) of the graph captured from ``t0``: the file's execution_details.json entry,
    else the capture label around it (``capture_<n>_<MODE>``; vLLM's draft graphs
    ``capture_<n>_draft_<MODE>``), else a ``bs_<n>`` file name."""
    batch, draft = listed, False
    inside = regions.filter((pl.col("start_ns") <= t0) & (pl.col("end_ns") >= t0)).sort("start_ns")
    if inside.height:
        label = str(inside["name"][-1])
        if batch is None:
            batch = int(inside["name"].str.extract(CAPTURE_LABEL_RE, 1).cast(pl.Int64)[-1])
        draft = bool(re.search(_DRAFT_LABEL_RE, label))
    return (named_bs if batch is None else batch), draft


def imax(s: pl.Series, default: int = 0) -> int:
    """Largest value of an integer column, ``default`` when it has none."""
    v = s.max()
    return int(v) if isinstance(v, (int, float)) else default


def _seq_sig(keys: pl.Series) -> int:
    return int(
        pl.DataFrame({"k": keys, "p": pl.int_range(keys.len(), eager=True)})
        .select(pl.struct("k", "p").hash(7).sum())
        .item()
        or 0
    )


# ---------------------------------------------------------------- matching replays to graphs
_MATCH_EXACT: Final = "node sequence"
_MATCH_OCC: Final = "node names and counts (order differs)"
_MATCH_KIND: Final = "node kinds in order (capture names no kernels)"


def replays(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(launches, nodes) of the graph replays in ``trace``. launches: correlation, pid, tid,
    start_ns, end_ns, name, api, nodes, sig, msig, ksig (kinds only), batch (of the launching
    region), region; nodes: correlation, row (in ``trace.kernels``), key, kkey (kind), occ."""
    gl = (
        trace.launches.filter(pl.col("name").str.contains(GRAPH_LAUNCH_PREFIX_RE) & pl.col("correlation").is_not_null())
        .sort("start_ns")
        .unique("correlation", keep="first", maintain_order=True)
    )
    k = trace.kernels.with_row_index("row").filter(pl.col("correlation").is_in(gl["correlation"].implode()))
    k = k.sort("correlation", "start_ns", "end_ns", "row").select(
        "correlation",
        pl.col("row").cast(pl.Int64),
        pl.when(pl.col("kind") == "kernel").then(pl.col("name")).otherwise(pl.col("kind")).alias("key"),
        pl.col("kind").alias("kkey"),
    )
    k = k.with_columns(pl.int_range(pl.len(), dtype=pl.Int64()).over("correlation").alias("pos"))
    k = k.with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64()).over("correlation", "key").alias("occ"),
        pl.int_range(pl.len(), dtype=pl.Int64()).over("correlation", "kkey").alias("kocc"),
    )
    sigs = k.group_by("correlation").agg(
        pl.len().cast(pl.Int64).alias("nodes"),
        pl.struct(pl.col("key").alias("k"), pl.col("pos").alias("p")).hash(7).sum().alias("sig"),
        pl.col("key").hash(11).sum().alias("msig"),
        pl.struct(pl.col("kkey").alias("k"), pl.col("pos").alias("p")).hash(7).sum().alias("ksig"),
    )
    gl = gl.join(sigs, on="correlation", how="inner")
    reg = trace.regions.filter(pl.col("kind") != "gpu_user_annotation")
    pts = gl.select("pid", "tid", pl.col("start_ns").alias("t"))
    row = innermost_rows(pts, reg, ["pid", "tid"], "region_id")
    # The step: the innermost enclosing region whose name gives a graph key (vLLM execute_…,
    # SGLang step[… bs=…]); its key and id group the replays that are paired in order.
    steps = reg.with_columns(graph_key(pl.col("name")).alias("_key")).filter(pl.col("_key").is_not_null())
    srow = innermost_rows(pts, steps, ["pid", "tid"], "region_id")
    gl = gl.with_columns(
        reg["name"].gather(row).alias("region"),
        steps["region_id"].gather(srow).alias("step"),
        steps["_key"].gather(srow).alias("batch"),
    )
    return gl.select(
        "correlation",
        "pid",
        "tid",
        "start_ns",
        "end_ns",
        "name",
        "api",
        "nodes",
        "sig",
        "msig",
        "ksig",
        "step",
        "batch",
        "region",
    ), k


BY_SEQUENCE: Final = "sequence"
BY_ORDER: Final = "order"


def resolve_keys(launches: pl.DataFrame, graphs: pl.DataFrame) -> pl.Series:
    """Per launch: the captured key its step replays (``gkey``): the step's own key when a graph was
    captured for it, else the smallest captured key above it (engines pad a step up to the next
    captured size); null when the step states none or is above every captured key."""
    keys = graphs["batch"].drop_nulls().unique().sort()
    if keys.len() == 0:
        return pl.repeat(None, launches.height, dtype=pl.Int64, eager=True)
    k = keys.to_frame("gkey").with_columns(pl.col("gkey").alias("_k"))
    want = launches.select(pl.col("batch").alias("_k")).with_row_index("_i")
    hit = want.drop_nulls("_k").sort("_k").join_asof(k.sort("_k"), on="_k", strategy="forward")
    return want.join(hit.select("_i", "gkey"), on="_i", how="left").sort("_i")["gkey"]


def match(launches: pl.DataFrame, graphs: pl.DataFrame) -> pl.DataFrame:
    """One row per graph launch: graph (null when none), how its nodes matched (``how``), how it
    was paired (``paired``: by sequence, by order, or null) and why not (``reason``).

    Candidates are the graphs captured for the step's key (:func:`resolve_keys`; every graph when
    the step has no key, or the graph states none) whose nodes match (:data:`_MATCH_EXACT`, else
    the names and counts, else the kinds for unnamed captures). Within one capture file and key,
    a single graph with those nodes is the match (by sequence); several (the identical middle
    layers of piecewise graphs) pair in order: the step's k-th replay with these nodes gets the
    k-th such graph in capture order (by order). Candidates in more than one file are refused.
    """
    launches = launches.with_columns(resolve_keys(launches, graphs).alias("gkey"))
    cand = _candidates(launches, graphs)
    # in order only among graphs of a known key: identical graphs of unknown keys may be several
    # sizes' captures in one file, and which size a step ran is then not known
    ok = cand.filter((pl.col("_gn") == 1) | ((pl.col("_rocc") == pl.col("_gocc")) & pl.col("batch_g").is_not_null()))
    ok = ok.with_columns(
        pl.when(pl.col("_gn") == 1).then(pl.lit(BY_SEQUENCE)).otherwise(pl.lit(BY_ORDER)).alias("paired"),
        pl.len().over("correlation").alias("_n"),
    )
    pick = ok.filter(pl.col("_n") == 1)
    amb = (
        ok.filter(pl.col("_n") > 1)
        .group_by("correlation")
        .agg(
            pl.len().alias("_k"),
            pl.col("file").n_unique().alias("_files"),
            pl.col("batch_g").unique().sort().alias("_bs"),
        )
    )
    short = (
        cand.filter(~pl.col("correlation").is_in(ok["correlation"].implode()))
        .group_by("correlation")
        .agg(
            pl.col("_rocc").first().alias("_r"),
            pl.col("_gn").max().alias("_gmax"),
            pl.col("batch_g").is_null().all().alias("_nokey"),
        )
    )
    out = launches.join(
        pick.select("correlation", "graph", "how", "paired", pl.col("file")), on="correlation", how="left"
    )
    out = out.join(amb, on="correlation", how="left").join(short, on="correlation", how="left")
    return out.with_columns(_why_not(graphs).alias("reason")).drop("_k", "_bs", "_files", "_r", "_gmax", "_nokey")


def _candidates(launches: pl.DataFrame, graphs: pl.DataFrame) -> pl.DataFrame:
    """Each launch with the graphs its nodes match, by the most exact rule that finds one (exact
    sequence, names and counts, kinds of an unnamed capture), with the occurrence of these nodes
    among the step's replays (``_rocc``, start order) and among the graphs of one file and key
    (``_gocc`` of ``_gn``, capture order)."""
    named, unnamed = graphs.filter(pl.col("named")), graphs.filter(~pl.col("named"))
    flavours = (
        (named, ["sig"], _MATCH_EXACT, 0),
        (named, ["msig", "nodes"], _MATCH_OCC, 1),
        (unnamed.rename({"sig": "ksig"}), ["ksig"], _MATCH_KIND, 2),
    )
    parts = []
    for g, on, how, pref in flavours:
        # occurrence of these nodes among the step's replays (start order), and among the graphs
        # of one file and key (capture order)
        lo = launches.with_columns(pl.col("start_ns").rank("ordinal").over(["step", *on]).cast(pl.Int64).alias("_rocc"))
        go = g.select("graph", "file", pl.col("batch").alias("batch_g"), *on).with_columns(
            pl.col("graph").rank("ordinal").over(["file", "batch_g", *on]).cast(pl.Int64).alias("_gocc"),
            pl.len().over(["file", "batch_g", *on]).cast(pl.Int64).alias("_gn"),
        )
        c = lo.join(go, on=on, how="inner").filter(
            pl.col("batch").is_null() | pl.col("batch_g").is_null() | (pl.col("batch_g") == pl.col("gkey"))
        )
        parts.append(c.with_columns(pl.lit(how).alias("how"), pl.lit(pref).alias("pref")))
    cand = pl.concat(parts, how="diagonal_relaxed").sort("correlation", "pref")
    return cand.filter(pl.col("pref") == pl.col("pref").min().over("correlation"))


def _why_not(graphs: pl.DataFrame) -> pl.Expr:
    """Why a launch's replay was left unmapped (null when mapped), from the columns :func:`match` joins."""
    counts = graphs["nodes"].unique().sort().to_list()
    top = graphs["batch"].max()

    def key(words: str) -> pl.Expr:
        return (
            pl.when(pl.col("gkey").is_not_null())
            .then(pl.lit(words) + pl.col("gkey").cast(pl.String))
            .otherwise(pl.lit(""))
        )

    no_key = pl.format(
        "{} captured graphs have these {} nodes and no graph key (no execution_details.json entry, "
        "capture_<n>_… label or bs_<n> file name), so the capture order does not pair them",
        pl.col("_gmax"),
        pl.col("nodes"),
    )
    fewer = pl.format(
        "the step replays {} graphs with these {} nodes but {} were captured{}",
        *(pl.col("_r"), pl.col("nodes"), pl.col("_gmax"), key(" for key ")),
    )
    above = pl.format("the step's graph key {} is above every captured key (largest {})", "batch", pl.lit(top))
    return first(
        (pl.col("graph").is_not_null(), pl.lit(None, pl.String)),
        (pl.col("batch").is_not_null() & pl.col("gkey").is_null() & pl.lit(top is not None), above),
        (pl.col("_k").is_not_null(), _ambiguous()),
        (pl.col("_nokey").fill_null(False), no_key),
        (pl.col("_r").is_not_null(), fewer),
        otherwise=pl.format(
            "{} replayed nodes; no captured graph{} has the same nodes (captured graphs: {} nodes)",
            *(pl.col("nodes"), key(" of key "), pl.lit(", ".join(map(str, counts)) or "none")),
        ),
    )


def _ambiguous() -> pl.Expr:
    """Why several captured graphs with a launch's nodes left it unmapped: overlapping capture files,
    or a launch in no step that states a graph key."""
    keys = pl.col("_bs").cast(pl.List(pl.String)).list.join("/")
    return (
        pl.when(pl.col("_files") > 1)
        .then(
            pl.format(
                "{} captured graphs in {} capture files have these {} nodes for graph key {}: the files "
                "overlap (pass only one of them with --capture)",
                pl.col("_k"),
                pl.col("_files"),
                pl.col("nodes"),
                keys,
            )
        )
        .otherwise(
            pl.format(
                "{} captured graphs have these {} nodes (keys {}) and the launch is in no step that "
                "states a graph key (vLLM execute_…, SGLang step[… bs=…])",
                pl.col("_k"),
                pl.col("nodes"),
                keys,
            )
        )
    )
