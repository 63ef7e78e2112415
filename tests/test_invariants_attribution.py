"""Attribution invariants on every shared real trace, plus facts about specific traces that follow
from their content (stated in the comments)."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import polars as pl
import pytest

import tracekit
from conftest import kineto_trace_files, nsys_export_files
from tracekit.attribution.codes import REASON_NO_LAUNCH, VIA_FORWARD
from tracekit.attribution.core import Attribution, attribute
from tracekit.attribution.invariants import check_conservation, check_links
from tracekit.tables.trace import Trace

HAS_NSYS = importlib.util.find_spec("tracekit.sources.nsys.loader") is not None


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[Trace, Attribution]:
    tr = tracekit.load(path)
    return tr, attribute(tr)


def _check(path: Path) -> None:
    tr, a = _load(str(path))
    check_conservation(a, tr)  # attributed + unattributed == total, to the ns; each activity once
    check_links(a)  # one region per level, level 0 = the activity's region
    # Every attributed region is a CPU-side region of the trace, never a gpu_user_annotation.
    cpu = tr.regions.filter(pl.col("kind") != "gpu_user_annotation")["region_id"]
    assert a.region_links["region_id"].is_in(cpu.implode()).all()


@pytest.mark.parametrize("path", kineto_trace_files(), ids=lambda p: p.name)
def test_conservation_kineto(shared_traces: Path, path: Path) -> None:
    _check(path)


@pytest.mark.skipif(not HAS_NSYS, reason="tracekit.sources.nsys.loader not written yet")
@pytest.mark.parametrize("path", nsys_export_files(), ids=lambda p: p.name)
def test_conservation_nsys(shared_traces: Path, path: Path) -> None:
    _check(path)


def test_autograd_thread_kernels_go_to_backward_region(shared_traces: Path) -> None:
    # nccl_parser_config: the backward runs on the autograd thread (2919752), which holds only
    # nccl:all_reduce regions; its ops share sequence numbers with the main thread (2910249), whose
    # forward ops start first → forward thread. The main thread sits in "## backward ##" meanwhile,
    # so every autograd-thread kernel outside nccl:all_reduce lands there; none in "## forward ##".
    tr, a = _load(str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz"))
    assert a.thread_links.select("pid", "tid", "fwd_tid").rows() == [(2910249, 2919752, 2910249)]
    bg = a.activities.filter(pl.col("launch_tid") == 2919752)
    assert bg["unattributed_reason"].null_count() == bg.height  # all attributed
    assert set(bg.filter(pl.col("region_via") == VIA_FORWARD)["region_name"]) == {"## backward ##"}
    assert set(bg["region_name"]) == {"## backward ##", "nccl:all_reduce"}
    # The all_reduce regions of the autograd thread hang under "## backward ##" in the region tree,
    # so their kernels count in the backward totals too.
    tree = a.region_tree.join(
        a.region_tree.select(pl.col("region_id").alias("parent_id"), pl.col("name").alias("pname")), on="parent_id"
    )
    assert set(tree.filter(pl.col("name") == "nccl:all_reduce")["pname"]) == {"## backward ##"}


def test_graph_replay_kernels_go_to_the_launching_region(shared_traces: Path) -> None:
    # vllm_decode_full: one region (the execute_… step); the decode graph replays 421 kernels that
    # share the correlation of a single hipGraphLaunch; all are attributed to that region.
    # Without its capture trace (the capture_traces/ folder beside it is not read here).
    from tracekit.attribution.core import attribute
    from tracekit.sources import load

    tr = load(
        shared_traces / "kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz", discover_captures=False
    )
    a = attribute(tr)
    g = a.activities.filter(pl.col("launch_name") == "hipGraphLaunch")
    assert (
        g["correlation"].n_unique() == 1
        and g.height == tr.kernels.filter(pl.col("correlation") == g["correlation"][0]).height
    )
    assert g.height == 421 and g["op_id"].is_null().all()
    assert g["region_name"].str.starts_with("execute_32_context_0").all()
    assert a.unattributed.height == 0
    # With it (found beside the trace): each of the 421 kernels has a launch of its own (a
    # zero-length graph-node call inside the graph launch) and a captured op, same region.
    tr, a = _load(str(shared_traces / "kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz"))
    g = a.activities.filter(pl.col("launch_name") == "hipGraphLaunch:node")
    assert g.height == 421 and g["correlation"].n_unique() == 421 and g["op_id"].null_count() == 0
    assert (g["op_link"] == "external id").all()
    assert g["region_name"].str.starts_with("execute_32_context_0").all()
    assert a.unattributed.height == 0


def test_kernels_before_the_profiling_window_have_no_launch(shared_traces: Path) -> None:
    # tracelens h100 Qwen: some kernels were launched before the profiler's CPU window opened; their
    # correlation ids are all below the smallest recorded launch correlation, and they are exactly
    # the activities unattributed for "no launch with this correlation".
    tr, a = _load(str(shared_traces / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    first = tr.launches["correlation"].min()
    early = tr.kernels.filter(pl.col("correlation") < first).height
    un = a.unattributed
    assert early > 0 and un.height == early
    assert set(un["unattributed_reason"]) == {REASON_NO_LAUNCH}
    assert (un["correlation"] < first).all()
