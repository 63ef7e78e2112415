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
  Several matching graphs (the same kernels captured for several batch sizes) are told apart
  by the batch size: the graph's (``execution_details.json`` ``batch_size``, or a
  ``capture_<bs>_…`` annotation / ``bs_<bs>`` file name) against the launching region's
  (``bs=``, ``execute_…_context_n…_generation_m…``). Still ambiguous, or no graph with the same
  node counts: the replay is left as it was and a warning gives the counts — never a guess.
- A match copies the captured ops that are on the path of some node (each node's launching op
  and its ancestors inside the capture span) onto the graph launch's thread, laid out inside the
  graph-launch call in their captured order (their boundaries are ranked and spread evenly, so
  nesting is kept exactly), and adds one zero-length launch per node, named
  ``<graph launch>:node``, whose correlation the replayed kernel now carries. External ids are
  renumbered above the trace's own. The launching region does not change.

Everything the merge did is in ``meta["capture"]`` (files, one row per graph launch: counts,
status, reason) and the tables themselves, so an ingested dataset needs no capture file later.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Final

import msgspec
import polars as pl

from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.intervals import nest
from tracekit.tables.trace import Trace

CAPTURE_DIR: Final = "capture_traces"
DETAILS_FILE: Final = "execution_details.json"
GRAPH_LAUNCH_RE: Final = r"^(cuda|hip|cu)GraphLaunch"
_BEGIN_RE: Final = r"^(cuda|hip|cu)StreamBeginCapture"
_END_RE: Final = r"^(cuda|hip|cu)StreamEndCapture"
_KERNEL_CALL_RE: Final = r"(?i)launch(kernel|cooperative)|^cuLaunch|ModuleLaunch"
NODE_SUFFIX: Final = ":node"
_SEP: Final = "\x1f"


# ---------------------------------------------------------------- reading capture traces
class _Args(msgspec.Struct):
    kernel: Any = None
    correlation: Any = None


class _Ev(msgspec.Struct):
    cat: Any = None
    args: _Args | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Ev] = []


def _kernel_names(path: Path) -> pl.DataFrame:
    """(correlation, kernel) of every runtime/driver call that names its kernel (ROCm traces do,
    CUDA traces do not). A second, light pass over the file: the canonical tables keep no
    launch arguments."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        doc = msgspec.json.decode(raw, type=_Doc)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return pl.DataFrame(schema={"correlation": pl.Int64(), "kernel": pl.String()})
    rows = [
        (e.args.correlation, e.args.kernel)
        for e in doc.traceEvents
        if e.cat in ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
        and e.args is not None
        and isinstance(e.args.kernel, str)
        and isinstance(e.args.correlation, int)
    ]
    return pl.DataFrame(rows, schema={"correlation": pl.Int64(), "kernel": pl.String()}, orient="row")


def discover(trace_path: str | os.PathLike[str]) -> list[Path]:
    """Capture traces beside a trace file: ``<dir>/capture_traces/`` (the files its
    ``execution_details.json`` lists, else every ``*.json``/``*.json.gz`` there)."""
    d = Path(trace_path).parent / CAPTURE_DIR
    if not d.is_dir():
        return []
    listed = [d / str(e["file"]) for e in _details(d) if isinstance(e.get("file"), str)]
    found = [p for p in listed if p.is_file()]
    if found:
        return found
    return sorted(
        p for p in d.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")) and p.name != DETAILS_FILE
    )


def _details(d: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((d / DETAILS_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _batch_of_file(path: Path) -> int | None:
    for e in _details(path.parent):
        if e.get("file") == path.name and isinstance(e.get("batch_size"), int):
            return int(e["batch_size"])
    m = re.search(r"(?:^|[_-])bs[_-]?(\d+)", path.name)
    return int(m.group(1)) if m else None


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
    end_all = _imax(la["end_ns"])
    windows += [(p, t, s, end_all) for (p, t), s in open_.items()]  # a capture never ended: to the end
    batch_file = _batch_of_file(path)
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


def _imax(s: pl.Series, default: int = 0) -> int:
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
                "{} captured graphs have these {} nodes and the batch size does not single one out (launch batch {}, graphs {})",
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


# ---------------------------------------------------------------- the merge
def merge_captures(trace: Trace, captures: Sequence[str | os.PathLike[str]]) -> Trace:
    """``trace`` with every graph replay that matches a captured graph of ``captures`` given
    captured ops and per-node launches (module docstring). Unmatched replays stay as they were;
    ``meta["capture"]`` records every graph launch and ``meta["warnings"]`` the problems.
    Raises nothing for a capture that does not fit (it maps nothing and says so); a capture file
    that cannot be read raises the loader's one-line error."""
    from tracekit.sources import load

    files = [Path(c) for c in captures]
    gl: list[pl.DataFrame] = []
    nl: list[pl.DataFrame] = []
    ol: list[pl.DataFrame] = []
    for p in files:
        cap = load(p, discover_captures=False)
        g, n, o = captured_graphs(cap, _kernel_names(p), sum(x.height for x in gl), p)
        gl.append(g)
        nl.append(n)
        ol.append(o)
    graphs = pl.concat(gl) if gl else pl.DataFrame()
    launches, rnodes = replays(trace)
    meta = dict(trace.meta)
    warnings = list(meta.get("warnings") or [])
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
    bad = m.filter(pl.col("graph").is_null())
    if bad.height:
        t = trace.kernels.filter(pl.col("correlation").is_in(bad["correlation"].implode()))
        ns = int((t["end_ns"] - t["start_ns"]).sum() or 0)
        first = bad.sort("start_ns").row(0, named=True)
        warnings.append(
            f"capture: {bad.height} of {m.height} graph replays not mapped ({t.height} kernels, {ns / 1e6:.3g} ms "
            f"stay on their graph launch); first: {first['reason']}"
        )
    meta["capture"] = {
        "files": [str(p) for p in files],
        "graphs": graphs.height,
        "launches": m.select(
            "correlation", "start_ns", "region", "nodes", "batch", "graph", "how", "file", "reason"
        ).to_dicts(),
        "mapped_launches": ok.height,
        "mapped_kernels": int(ok["nodes"].sum() or 0),
    }
    return Trace(out[0], out[1], out[2], trace.regions, {**meta, "warnings": warnings})


def _apply(
    trace: Trace, ok: pl.DataFrame, nodes: pl.DataFrame, cops: pl.DataFrame, graphs: pl.DataFrame, rnodes: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    kernels, launches, ops = trace.kernels, trace.launches, trace.ops
    if ok.height == 0:
        return kernels, launches, ops
    ext_cols = [t["external_id"] for t in (kernels, launches, ops, trace.regions) if "external_id" in t.columns]
    ext_base = max([_imax(c) for c in ext_cols] + [0]) + 1
    ext_span = max(_imax(nodes["cap_ext"]), _imax(cops["cap_ext"])) + 1
    corr_base = max(_imax(kernels["correlation"]), _imax(launches["correlation"])) + 1
    op_base = _imax(ops["op_id"], -1) + 1
    # Spread the graph's ranked boundaries evenly over the graph-launch call (≥ 1 ns apart).
    lay = ok.join(graphs.select("graph", "bounds"), on="graph").select(
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
    add_l = new_l.select(
        pl.lit(trace.trace_id, pl.String).alias("trace_id"),
        "api",
        (pl.col("name") + NODE_SUFFIX).alias("name"),
        "pid",
        "tid",
        pl.col("t").alias("start_ns"),
        pl.col("t").alias("end_ns"),
        pl.col("new_corr").alias("correlation"),
        pl.col("new_ext").alias("external_id"),
    )
    # Replayed kernel ↔ node: by (key, occurrence); for kind-only graphs by (kind, occurrence).
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
    corr = (
        kernels["correlation"].scatter(mapped["row"], mapped["new_corr"]) if mapped.height else kernels["correlation"]
    )
    kext = kernels["external_id"].scatter(mapped["row"], mapped["new_ext"]) if mapped.height else kernels["external_id"]
    kernels = kernels.with_columns(corr.alias("correlation"), kext.alias("external_id"))
    launches = pl.concat([launches, add_l.select(launches.columns)], how="vertical_relaxed")
    # Re-nest the threads that received ops (the layout keeps the captured nesting exactly).
    threads = ok.select("pid", "tid").unique()
    allops = pl.concat([ops.drop("depth", "parent_id"), new_ops], how="diagonal_relaxed")
    hit = allops.join(threads, on=["pid", "tid"], how="semi")
    nested = nest(hit, ["pid", "tid"], "op_id").select("op_id", "depth", "parent_id")
    keep = ops.select("op_id", "depth", "parent_id").join(nested.select("op_id"), on="op_id", how="anti")
    dp = pl.concat([keep, nested], how="vertical_relaxed")
    ops = allops.join(dp, on="op_id", how="left", maintain_order="left").select(ops.columns)
    ops = ops.with_columns(pl.col("depth").cast(trace.ops.schema["depth"]))
    return kernels, launches, ops


def replay_note(activities: pl.DataFrame) -> str | None:
    """One line for the output when graph replays kept no ops (no capture trace, or none that
    matched): kernels, device time and graph launches; None when there are none."""
    if "launch_name" not in activities.columns:
        return None
    g = activities.filter(
        pl.col("launch_name").str.contains(GRAPH_LAUNCH_RE) & ~pl.col("launch_name").str.ends_with(NODE_SUFFIX)
    )
    if g.height == 0:
        return None
    ns = int(g["dur_ns"].sum() or 0)
    return (
        f"graph replay without capture trace: {g.height} kernels, {ns / 1e6:.3g} ms of device time in "
        f"{g['correlation'].n_unique()} graph launches have no op and no shapes (pass --capture FILE, or keep "
        "the capture_traces/ folder vLLM/SGLang write beside the trace)"
    )
