"""Graph-capture merge, stage one: the captured graphs of a capture trace, the graph replays of a
trace, and which captured graph each replay ran (the rule is in the docstring of
:mod:`tracekit.sources.kineto.capture.merge`, which applies the matches).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import polars as pl

from tracekit.sources.kineto.capture.files import batch_of_file
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.trace import Trace

GRAPH_LAUNCH_RE: Final = r"^(cuda|hip|cu)GraphLaunch"
_BEGIN_RE: Final = r"^(cuda|hip|cu)StreamBeginCapture"
_END_RE: Final = r"^(cuda|hip|cu)StreamEndCapture"
_KERNEL_CALL_RE: Final = r"(?i)launch(kernel|cooperative)|^cuLaunch|ModuleLaunch"

_BATCH_PATTERNS: Final = (
    r"\bbs=(\d+)",
    r"^capture_(\d+)_",
    r"^execute_context_(\d+)\(.*?_generation_(\d+)\(",
    r"^execute_\d+_context_(\d+)\(.*?_generation_(\d+)\(",
)


def region_batch(name: pl.Expr) -> pl.Expr:
    """Batch size a region name states (SGLang ``bs=``, vLLM context + generation requests,
    ``capture_<bs>_…``), else null. Used only to tell apart graphs captured per batch size."""
    out: pl.Expr = pl.lit(None, pl.Int64)
    for pat in reversed(_BATCH_PATTERNS):
        a = name.str.extract(pat, 1).cast(pl.Int64, strict=False)
        v = a + name.str.extract(pat, 2).cast(pl.Int64, strict=False) if "generation" in pat else a
        out = pl.when(v.is_not_null()).then(v).otherwise(out)
    return out


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
    la, ops = capture.launches, capture.ops
    marks = la.filter(pl.col("name").str.contains(_BEGIN_RE) | pl.col("name").str.contains(_END_RE)).sort("start_ns")
    windows: list[tuple[int, int, int, int]] = []
    open_: dict[tuple[int, int], int] = {}
    for pid, tid, nm, s, e in marks.select("pid", "tid", "name", "start_ns", "end_ns").iter_rows():
        if re.search(_BEGIN_RE, nm):
            open_[(pid, tid)] = s
        elif (pid, tid) in open_:
            windows.append((pid, tid, open_.pop((pid, tid)), e))
    end_all = imax(la["end_ns"])
    windows += [(p, t, s, end_all) for (p, t), s in open_.items()]  # a capture never ended: to the end
    batch_file = batch_of_file(path)
    regions = capture.regions.filter(pl.col("name").str.contains(r"^capture_\d+_"))
    gl, nl, ol = [], [], []
    for i, (pid, tid, t0, t1) in enumerate(sorted(windows, key=lambda w: w[2])):
        g = first_graph + i
        calls = la.filter((pl.col("pid") == pid) & (pl.col("tid") == tid) & pl.col("start_ns").is_between(t0, t1))
        calls = calls.join(names, on="correlation", how="left")
        kind = (
            pl.when(pl.col("kernel").is_not_null() | pl.col("name").str.contains(_KERNEL_CALL_RE))
            .then(pl.lit("kernel"))
            .when(pl.col("name").str.contains("(?i)memcpy"))
            .then(pl.lit("memcpy"))
            .when(pl.col("name").str.contains("(?i)memset"))
            .then(pl.lit("memset"))
        )
        nodes = calls.with_columns(kind.alias("_kind")).filter(pl.col("_kind").is_not_null()).sort("start_ns")
        named = bool(nodes.height) and nodes.filter(pl.col("_kind") == "kernel")["kernel"].null_count() == 0
        nodes = nodes.with_columns(
            pl.coalesce("kernel", "_kind").alias("key") if named else pl.col("_kind").alias("key")
        )
        # Ops on some node's path: the op named by the launch's External id (on this thread,
        # inside the span), and its ancestors inside the span.
        wops = ops.filter(
            (pl.col("pid") == pid) & (pl.col("tid") == tid) & (pl.col("start_ns") >= t0) & (pl.col("end_ns") <= t1)
        )
        keep = set(
            wops.filter(pl.col("external_id").is_in(nodes["external_id"].drop_nulls().implode()))["op_id"].to_list()
        )
        parent = dict(zip(wops["op_id"].to_list(), wops["parent_id"].to_list()))
        frontier = set(keep)
        while frontier:
            frontier = {parent[o] for o in frontier if parent.get(o) in parent} - keep
            keep |= frontier
        wops = wops.filter(pl.col("op_id").is_in(sorted(keep))).sort(
            "start_ns", pl.col("end_ns"), descending=[False, True]
        )
        bounds = pl.concat([wops["start_ns"], wops["end_ns"], nodes["start_ns"]]).unique().sort()
        rank = {v: k for k, v in enumerate(bounds.to_list())}
        batch = batch_file
        if batch is None and regions.height:
            inside = regions.filter((pl.col("start_ns") <= t0) & (pl.col("end_ns") >= t0))
            if inside.height:
                batch = int(inside["name"].str.extract(r"^capture_(\d+)_", 1).cast(pl.Int64)[0])
        keys = nodes["key"]
        gl.append(
            {
                "graph": g,
                "file": str(path),
                "batch": batch,
                "nodes": nodes.height,
                "named": named,
                "bounds": len(rank),
                "sig": _seq_sig(keys),
                "msig": _set_sig(keys),
            }
        )
        nl.append(
            pl.DataFrame(
                {
                    "graph": g,
                    "pos": pl.int_range(nodes.height, eager=True, dtype=pl.Int64()),
                    "key": keys,
                    "t_rank": nodes["start_ns"].replace_strict(rank, return_dtype=pl.Int64()),
                    "cap_ext": nodes["external_id"],
                }
            )
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64()).over("key").alias("occ"))
            .select(list(_NODE_SCHEMA))
        )
        ol.append(
            wops.select(
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
        )
    graphs = pl.DataFrame(
        gl,
        schema={
            "graph": pl.Int64(),
            "file": pl.String(),
            "batch": pl.Int64(),
            "nodes": pl.Int64(),
            "named": pl.Boolean(),
            "bounds": pl.Int64(),
            "sig": pl.UInt64(),
            "msig": pl.UInt64(),
        },
    )
    nodes_all = pl.concat(nl) if nl else pl.DataFrame(schema=_NODE_SCHEMA)
    ops_all = pl.concat(ol) if ol else pl.DataFrame(schema=_OP_SCHEMA)
    return graphs, nodes_all, ops_all


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


def _set_sig(keys: pl.Series) -> int:
    return int(keys.hash(11).sum() or 0)


# ---------------------------------------------------------------- matching replays to graphs
_MATCH_EXACT: Final = "node sequence"
_MATCH_OCC: Final = "node names and counts (order differs)"
_MATCH_KIND: Final = "node kinds in order (capture names no kernels)"


def replays(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(launches, nodes) of the graph replays in ``trace``. launches: correlation, pid, tid,
    start_ns, end_ns, name, api, nodes, sig, msig, ksig (kinds only), batch (of the launching
    region), region; nodes: correlation, row (in ``trace.kernels``), key, kkey (kind), occ."""
    gl = (
        trace.launches.filter(pl.col("name").str.contains(GRAPH_LAUNCH_RE) & pl.col("correlation").is_not_null())
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
    row = innermost_rows(gl.select("pid", "tid", pl.col("start_ns").alias("t")), reg, ["pid", "tid"], "region_id")
    names = reg["name"].gather(row)
    gl = gl.with_columns(names.alias("region")).with_columns(region_batch(pl.col("region")).alias("batch"))
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
        "batch",
        "region",
    ), k


def match(launches: pl.DataFrame, graphs: pl.DataFrame) -> pl.DataFrame:
    """One row per graph launch: graph (null when none), how it matched, and why not."""
    named, unnamed = graphs.filter(pl.col("named")), graphs.filter(~pl.col("named"))
    cand = (
        pl.concat(
            [
                launches.join(named.select("graph", "sig", "batch", "file"), on="sig", suffix="_g").with_columns(
                    pl.lit(_MATCH_EXACT).alias("how"), pl.lit(0).alias("pref")
                ),
                launches.join(
                    named.select("graph", "msig", "nodes", "batch", "file"), on=["msig", "nodes"], suffix="_g"
                ).with_columns(pl.lit(_MATCH_OCC).alias("how"), pl.lit(1).alias("pref")),
                launches.join(
                    unnamed.select("graph", pl.col("sig").alias("ksig"), "batch", "file"), on="ksig", suffix="_g"
                ).with_columns(pl.lit(_MATCH_KIND).alias("how"), pl.lit(2).alias("pref")),
            ],
            how="diagonal_relaxed",
        )
        .sort("correlation", "pref")
        .unique(["correlation", "graph"], keep="first", maintain_order=True)
    )
    # Best kind of match only; then the batch size tells graphs apart.
    cand = cand.filter(pl.col("pref") == pl.col("pref").min().over("correlation"))
    cand = cand.with_columns(
        pl.len().over("correlation").alias("_n"),
        (pl.col("batch_g") == pl.col("batch")).fill_null(False).alias("_same_bs"),
    )
    cand = cand.with_columns(pl.col("_same_bs").sum().over("correlation").alias("_nbs"))
    pick = cand.filter((pl.col("_n") == 1) | (pl.col("_same_bs") & (pl.col("_nbs") == 1)))
    amb = (
        cand.filter(~pl.col("correlation").is_in(pick["correlation"].implode()))
        .group_by("correlation")
        .agg(pl.len().alias("_k"), pl.col("batch_g").unique().sort().alias("_bs"))
    )
    out = launches.join(pick.select("correlation", "graph", "how", pl.col("file")), on="correlation", how="left")
    out = out.join(amb, on="correlation", how="left")
    counts = graphs["nodes"].unique().sort().to_list()
    why = (
        pl.when(pl.col("graph").is_not_null())
        .then(pl.lit(None, pl.String))
        .when(pl.col("_k").is_not_null())
        .then(
            pl.format(
                "{} captured graphs have these {} nodes and the batch size does not single one out "
                "(launch batch {}, graphs {})",
                pl.col("_k"),
                pl.col("nodes"),
                pl.col("batch").cast(pl.String).fill_null("unknown"),
                pl.col("_bs").cast(pl.List(pl.String)).list.join("/"),
            )
        )
        .otherwise(
            pl.format(
                "{} replayed nodes; no captured graph has the same nodes (captured graphs: {} nodes)",
                pl.col("nodes"),
                pl.lit(", ".join(map(str, counts)) or "none"),
            )
        )
    )
    return out.with_columns(why.alias("reason")).drop("_k", "_bs")
