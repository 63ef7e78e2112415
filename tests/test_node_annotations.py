"""Graph-node annotations (issue 39 item 3; tracekit/sources/node_annotations.py): a graphed decode
step whose kernels carry PyTorch's ``graph node id`` (the node's tools id, (graph id << 32) | node),
and the capture-time annotation file keyed by those ids: every graph kernel gets its op and shape,
and the FLOPs equal the eager twin's exactly (not estimated). The model is tests/test_kernel_map.py's
12-layer decode step."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk, tk_out  # noqa: E402
from test_kernel_map import HEAD, LAYER, TAIL, model_trace, work, write  # noqa: E402

GRAPH = 7  # the exec graph's id: a node's tools id is (7 << 32) | its index


def tools_id(i: int) -> int:
    return (GRAPH << 32) | i


def graphed_with_ids(layers: int) -> dict[str, Any]:
    doc = model_trace(layers, graphed=True)
    kernels = [e for e in doc["traceEvents"] if e["cat"] == "kernel"]
    for i, e in enumerate(kernels):
        e["args"]["graph node id"] = tools_id(i)
    return doc


def annotations(layers: int, scoped: bool = True) -> dict[str, Any]:
    """What mark_kernels records per node: an outer module scope, the op's own inner scope."""
    nodes = HEAD + LAYER * layers + TAIL
    out: dict[str, Any] = {}
    for i, (op, _kern, dims, types, _us) in enumerate(nodes):
        inner = {"op": op, "Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)}
        out[str(tools_id(i))] = [{"name": f"model.layers.{max(0, (i - 1) // 7)}"}, inner] if scoped else [inner]
    return out


def test_every_graph_kernel_gets_its_op_and_the_eager_flops(tmp_path: Path) -> None:
    eager = write(tmp_path, "eager", model_trace(12, graphed=False))
    graphed = write(tmp_path, "graphed", graphed_with_ids(12))
    ann = tmp_path / "graph_annotations.json"
    ann.write_text(json.dumps(annotations(12)))
    e = json.loads(tk_out("analyze", eager, "--format", "json"))
    doc = json.loads(tk_out("analyze", graphed, "--capture", ann, "--format", "json"))
    # by hand (tests/test_kernel_map.py): the GEMMs 2·T·(H·QKV + H·H + H·2FF + FF·H)·12 + 2·T·H·V and
    # 25 RMSNorms 4·T·H + 2·T each = 21,988,180,168 FLOPs — exactly, not within a tolerance
    assert work(e)[0] == work(doc)[0] == 21_988_180_168
    assert work(doc)[1] == work(e)[1]
    # every one of the 1 + 12·7 + 3 = 88 kernels mapped, into 88 ops (each op one kernel here)
    assert "graph-node annotations graph_annotations.json: 88 of 88 graph kernels given 88 ops with their " in (
        " ".join(doc["totals"]["warnings"])
    )
    assert doc["totals"]["trace"]["coverage"] == pytest.approx(e["totals"]["trace"]["coverage"])
    ops_e = {r["name"]: r["count"] for r in e["totals"]["top_shapes"]}
    ops_g = {r["name"]: r["count"] for r in doc["totals"]["top_shapes"]}
    assert ops_g == ops_e


def test_one_op_with_two_kernels_is_priced_once(tmp_path: Path) -> None:
    """Nodes 2 and 3 (the QKV GEMM and the attention kernel after it; node 0 is the embedding, 1
    the RMSNorm) annotated with one identical scope (one op, aten::mm [4, 4096] × [4096, 6144],
    that launched both): one op over 30 + 20 µs, 2·4·4096·6144 = 201,326,592 FLOPs once, not
    twice."""
    doc = graphed_with_ids(1)
    ann = annotations(1, scoped=False)
    ann[str(tools_id(3))] = ann[str(tools_id(2))]
    g = write(tmp_path, "g", doc)
    a = tmp_path / "a.json"
    a.write_text(json.dumps(ann))
    got = json.loads(tk_out("analyze", g, "--capture", a, "--format", "json"))
    qkv = [r for r in got["totals"]["top_shapes"] if r["name"] == "aten::mm" and "6144" in str(r.get("shape"))]
    assert len(qkv) == 1 and qkv[0]["count"] == 1 and qkv[0]["flops"] == 2 * 4 * 4096 * 6144 == 201_326_592
    assert qkv[0]["device_time_ns"] == 50_000


def test_unannotated_and_bad_files_are_said(tmp_path: Path) -> None:
    g = write(tmp_path, "g", graphed_with_ids(1))
    ann = annotations(1)
    del ann[str(tools_id(3))]  # one node without an annotation: stays on its graph launch, counted
    a = tmp_path / "a.json"
    a.write_text(json.dumps(ann))
    rc, out, err = tk("analyze", g, "--capture", a)
    assert rc == 0, err
    assert "1 graph kernel of 11 not mapped" in out + err
    # entries that are no tools id (a name, a number past int64) or hold no annotation (a bare
    # number): 3 left out and counted, the other 10 nodes still mapped
    a.write_text(json.dumps({**ann, "layer": [{"op": "aten::mm"}], str(1 << 64): [{"op": "aten::mm"}], "12": 42}))
    rc, out, err = tk("analyze", g, "--capture", a)
    assert rc == 0 and "Traceback" not in err, err
    assert "a.json: 3 entries left out" in out + err and "10 of 11 graph kernels given 10 ops" in out + err
    bad = tmp_path / "bad.json"
    bad.write_text('{"12": [')  # cut short
    rc, out, err = tk("analyze", g, "--capture", bad)
    assert rc != 0 and "Traceback" not in err and "graph-node annotation file" in err


def test_nsight_graph_node_ids_take_the_same_annotations(tmp_path: Path) -> None:
    """Nsight with --cuda-graph-trace=node stores each graph kernel's tools id as graphNodeId; the
    kernels share their cudaGraphLaunch's correlation. Two GEMM nodes annotated with aten::mm
    [64, 1024] × [1024, 1024] and [64, 1024] × [1024, 4096] (bf16): 2·64·1024·1024 = 134,217,728
    and 2·64·1024·4096 = 536,870,912 FLOPs, 671,088,640 in all."""
    import sqlite3

    from nsys_export import write_export

    path = write_export(
        tmp_path / "g.sqlite",
        [(10_000, 20_000, "nvjet_gemm_a", 5), (20_000, 40_000, "nvjet_gemm_b", 5)],
        ranges=[(0, 50_000, "tk:decode step=0")],
        launches=[(1_000, 3_000, 5)],
        runtime_name="cudaGraphLaunch_v10000",
    )
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN graphNodeId INTEGER")
    conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = ? WHERE start = 10000", (tools_id(0),))
    conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = ? WHERE start = 20000", (tools_id(1),))
    conn.commit()
    conn.close()
    bf = ["c10::BFloat16", "c10::BFloat16"]
    ann = {
        str(tools_id(0)): [{"op": "aten::mm", "Input Dims": [[64, 1024], [1024, 1024]], "Input type": bf}],
        str(tools_id(1)): [{"op": "aten::mm", "Input Dims": [[64, 1024], [1024, 4096]], "Input type": bf}],
    }
    a = tmp_path / "a.json"
    a.write_text(json.dumps(ann))
    doc = json.loads(tk_out("analyze", path, "--capture", a, "--format", "json"))
    assert doc["totals"]["trace"]["flops"] == 2 * 64 * 1024 * 1024 + 2 * 64 * 1024 * 4096 == 671_088_640
    assert "2 of 2 graph kernels given 2 ops" in " ".join(doc["totals"]["warnings"])
