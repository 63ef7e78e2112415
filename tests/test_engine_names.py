"""Issue 26 item 7: rank, parallel layout and stage from vLLM's and SGLang's trace file names
(tracekit/sources/engine_names.py; grammars in its docstring, from the engines' sources).
Every name here is constructed."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

import tracekit
from tracekit.sources.engine_names import EngineName, apply_engine_name, parse_engine_name

TS = "1754000000123456789"  # time.time_ns() as torch's tensorboard_trace_handler writes it


# ------------------------------------------------------------------ vLLM
def test_vllm_full_suffix() -> None:
    got = parse_engine_name(f"dp1_pp0_tp3_dcp0_ep11_rank11.{TS}.pt.trace.json.gz")
    assert got == EngineName("vllm", {"dp": 1, "pp": 0, "tp": 3, "dcp": 0, "ep": 11}, 11, None, None)
    assert got.layout() == {
        "engine": "vllm",
        "dp_rank": 1,
        "pp_rank": 0,
        "tp_rank": 3,
        "dcp_rank": 0,
        "ep_rank": 11,
        "rank": 11,
        "run": None,
        "stage": None,
    }


def test_vllm_prefix_plain_json_and_a_folder() -> None:
    # the profile prefix may itself hold underscores; the suffix is read from the right
    got = parse_engine_name(f"/runs/a/my_bench_run_dp0_pp1_tp2_dcp1_ep2_rank6.{TS}.pt.trace.json")
    assert got is not None
    assert (got.run, got.rank, got.ranks) == ("my_bench_run", 6, {"dp": 0, "pp": 1, "tp": 2, "dcp": 1, "ep": 2})


def test_vllm_without_dcp() -> None:
    got = parse_engine_name(f"dp0_pp0_tp1_ep1_rank1.{TS}.pt.trace.json.gz")
    assert got is not None and got.ranks == {"dp": 0, "pp": 0, "tp": 1, "ep": 1} and got.rank == 1


@pytest.mark.parametrize(
    ("name", "run", "rank"), [(f"rank5.{TS}.pt.trace.json.gz", None, 5), (f"pre_rank0.{TS}.pt.trace.json", "pre", 0)]
)
def test_vllm_rank_only(name: str, run: str | None, rank: int) -> None:
    # parallel state not initialised: the suffix is just rank{r}
    assert parse_engine_name(name) == EngineName("vllm", {}, rank, run, None)


# ------------------------------------------------------------------ SGLang
OPTIONAL = [("DP", "dp", 1), ("PP", "pp", 2), ("EP", "ep", 5)]
STAGES = [("", None), ("-prefill", "prefill"), ("-decode", "decode"), ("-EXTEND", "prefill"), ("-DECODE", "decode")]


@pytest.mark.parametrize("present", list(itertools.product([False, True], repeat=3)))
@pytest.mark.parametrize(("suffix", "stage"), STAGES)
def test_sglang_every_optional_part(present: tuple[bool, ...], suffix: str, stage: str | None) -> None:
    # {prefix}-{profile_id}-TP-3[-DP-1][-PP-2][-EP-5][-stage].trace.json.gz, each part present or not
    parts = "".join(f"-{tag}-{v}" for (tag, _, v), on in zip(OPTIONAL, present) if on)
    name = f"bench-1754000000.25-TP-3{parts}{suffix}.trace.json.gz"
    want = {"tp": 3} | {key: v for (_, key, v), on in zip(OPTIONAL, present) if on}
    assert parse_engine_name(name) == EngineName("sglang", want, None, "bench-1754000000.25", stage)


def test_sglang_older_name() -> None:
    # the scheduler's older form: {time.time()}-TP-{t}.trace.json.gz
    got = parse_engine_name("1730000000.123456-TP-0.trace.json.gz")
    assert got == EngineName("sglang", {"tp": 0}, None, "1730000000.123456", None)
    assert got.layout() == {"engine": "sglang", "tp_rank": 0, "rank": None, "run": "1730000000.123456", "stage": None}


@pytest.mark.parametrize(
    "name",
    [
        "sglang_Qwen3-8B_prefilldecode.json.gz",  # the shared SGLang trace: no -TP-
        "graph_execution.json.gz",
        "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",  # HTA's: rank-0, not rank0
        "host_1234.1700000000.pt.trace.json.gz",  # torch's default worker name (host_pid)
        "dp0_pp0_tp0_dcp0_ep0_rank0.json.gz",  # no time stamp, not .pt.trace.json
        "1730000000.1-TP-0-memory.trace.json.gz",  # a suffix that is not a stage
        "1730000000.1-TP-x.trace.json.gz",
        "1730000000.1-tp-0.trace.json.gz",  # SGLang writes TP in capitals
    ],
)
def test_names_that_match_neither(name: str) -> None:
    assert parse_engine_name(name) is None
    meta: dict[str, Any] = {"distributed": {}}
    apply_engine_name(meta, name)
    assert meta == {"distributed": {}}


# ------------------------------------------------------------------ the loader
def _write(path: Path, dist: dict[str, Any] | None = None) -> Path:
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {}}
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": [ev]}
    if dist is not None:
        doc["distributedInfo"] = dist
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def test_loader_fills_rank_from_a_vllm_name(tmp_path: Path) -> None:
    meta = tracekit.load(str(_write(tmp_path / f"dp0_pp0_tp5_dcp0_ep5_rank5.{TS}.pt.trace.json.gz"))).meta
    assert meta["distributed"] == {"rank": 5, "world_size": None, "backend": None}
    assert meta["layout"]["tp_rank"] == 5 and meta["layout"]["rank_from"] == "file name"


def test_loader_keeps_the_traces_own_rank(tmp_path: Path) -> None:
    # distributedInfo wins; the name's layout is still recorded
    dist = {"rank": 2, "world_size": 8, "backend": "nccl"}
    meta = tracekit.load(str(_write(tmp_path / f"dp0_pp0_tp5_dcp0_ep5_rank5.{TS}.pt.trace.json", dist))).meta
    assert meta["distributed"] == {"rank": 2, "world_size": 8, "backend": "nccl"}
    assert meta["layout"]["rank"] == 5 and "rank_from" not in meta["layout"]


def test_loader_reads_an_sglang_stage(tmp_path: Path) -> None:
    meta = tracekit.load(str(_write(tmp_path / "run-1754000000.5-TP-1-EP-1-DECODE.trace.json.gz"))).meta
    assert meta["layout"] == {
        "engine": "sglang",
        "tp_rank": 1,
        "ep_rank": 1,
        "rank": None,
        "run": "run-1754000000.5",
        "stage": "decode",
    }
    assert meta["distributed"] == {}  # SGLang's name gives no global rank


def test_loader_without_an_engine_name(tmp_path: Path) -> None:
    assert "layout" not in tracekit.load(str(_write(tmp_path / "trace.json"))).meta


def test_parallelism_row_says_ranks_for_an_engine_name(tmp_path: Path) -> None:
    # tp5 in a vLLM name is the tensor-parallel rank, not a degree of 5
    from tracekit.analysis import features

    meta = tracekit.load(str(_write(tmp_path / f"dp0_pp0_tp5_dcp0_ep5_rank5.{TS}.pt.trace.json"))).meta
    row = features.parallelism(meta)
    assert row["state"] == "dp rank 0, pp rank 0, tp rank 5, dcp rank 0, ep rank 5"
    assert row["detail"].startswith("from vllm's file name: ranks within each group")
    sg = tracekit.load(str(_write(tmp_path / "r-1.5-TP-1-PP-1-prefill.trace.json.gz"))).meta
    assert features.parallelism(sg)["state"] == "pp rank 1, tp rank 1, stage prefill"
