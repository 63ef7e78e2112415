"""Jobs, not piles (issue 27 item 5): the traces of a dataset are grouped into jobs
(tracekit/analysis/ranks/jobs.py) and ranks are compared only within a job. Constructed datasets of
vLLM-style traces (tests/serving_traces.py, jitter 0: every kernel at its base time):

- a step is an annotation at t, its kernels from t + 10 µs back to back, the next step 20 µs after
  its last kernel; a phase unit's window runs to the next unit's start (the last one to its last
  kernel's end): prefill 10 + 2,000 + 500 + 20 = 2,530 µs, decode 10 + (300 + 100) × scale + 20 µs,
  the last decode step 20 µs less;
- a rank trace carries ``distributedInfo`` (rank r of world W); an unrelated trace another device
  name, other steps (SGLang-style ``step[...]`` names) or another file name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
from serving_traces import write_serving_trace  # noqa: E402

from tracekit.analysis.ranks.jobs import KEY_SCHEMA, family, group_jobs, step_kinds  # noqa: E402
from cli_run import tk

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85899345920, "computeMajor": 9, "numSms": 132}]
MI300X = [{"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206158430208, "computeMajor": 9, "numSms": 304}]
B200 = [{"id": 0, "name": "NVIDIA B200", "totalGlobalMem": 193273528320, "computeMajor": 10, "numSms": 148}]


def rank_trace(path: Path, rank: int | None, world: int | None, devices: list[dict[str, Any]], **kw: Any) -> None:
    extra: dict[str, Any] = {"deviceProperties": devices}
    if rank is not None:
        extra["distributedInfo"] = {"rank": rank, "world_size": world, "backend": "nccl"}
    write_serving_trace(path, seed=rank or 0, decode_steps=4, jitter=0.0, extra=extra, **kw)


def ingest_analyze(src: Path, tmp: Path) -> tuple[dict[str, Any], str]:
    code, _, err = tk("ingest", str(src), "--out", str(tmp / "ds"), "--workers", "1")
    assert code == 0, err
    code, out, err = tk("analyze", str(tmp / "ds"), "--workers", "1", "--format", "json")
    assert code == 0, err
    code, text, err = tk("analyze", str(tmp / "ds"), "--workers", "1")
    assert code == 0, err
    return json.loads(out), text


def test_four_ranks_and_one_unrelated_trace(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for r in range(4):  # rank 2's decode steps take 2× as long: 10 + 800 + 20 = 830 µs vs 430 µs
        rank_trace(src / f"llama_rank{r}.json", r, 4, H100, decode_scale=2.0 if r == 2 else 1.0)
    # other device, other steps (step[EXTEND...], step[DRAFT_EXTEND...]...), decode 20× slower: were
    # it compared as a rank it would be the slowest in every step
    rank_trace(src / "qwen_mi300x.json", None, None, MI300X, speculative=True, decode_scale=20.0)
    doc, text = ingest_analyze(src, tmp_path)
    jobs = doc["jobs"]
    assert [len(j["traces"]) for j in jobs] == [4, 1] or [len(j["traces"]) for j in jobs] == [1, 4]
    four = next(j for j in jobs if len(j["traces"]) == 4)
    alone = next(j for j in jobs if len(j["traces"]) == 1)
    assert four["compared"] and not alone["compared"]
    assert all(t.startswith("llama_rank") for t in four["traces"]) and alone["traces"][0].startswith("qwen_mi300x")
    assert four["key"]["device"] == "NVIDIA H100 80GB HBM3" and four["key"]["world_size"] == 4
    assert four["key"]["family"] == "llama_rank{r}" and alone["key"]["device"] == "AMD Instinct MI300X"
    # one comparison: the four ranks; the MI300X trace in none of its rows
    (cmp,) = doc["comparisons"]
    assert cmp["job"] == four["id"] and [t["rank"] for t in cmp["traces"]] == [0, 1, 2, 3]
    assert all(t["trace_id"].startswith("llama_rank") for t in cmp["traces"])
    assert {s["ranks"] for s in cmp["stragglers"]} == {4}
    # step 0 (prefill, 2,530 µs on every rank): ratio 1; steps 1–3 (decode): rank 2 at 830 µs vs
    # the median 430 µs of [430, 430, 430, 830] → 830 / 430 = 1.930 ≥ 1.1; step 4 (the last):
    # 810 / 410 = 1.976, the worst step
    by_step = {s["step"]: s for s in cmp["stragglers"]}
    assert not by_step[0]["straggler"] and abs(by_step[0]["ratio"] - 1.0) < 1e-9
    for k, ratio in ((1, 830 / 430), (2, 830 / 430), (3, 830 / 430), (4, 810 / 410)):
        assert by_step[k]["straggler"] and by_step[k]["slowest_rank"] == 2
        assert abs(by_step[k]["ratio"] - ratio) < 1e-3
    assert cmp["worst_step"]["step"] == 4 and cmp["worst_step"]["slowest_rank"] == 2
    assert len(cmp["step_time"]) == 4 * 5
    # the unrelated trace is listed with its job, rank-less
    row = next(t for t in doc["traces"] if t["trace_id"] == alone["traces"][0])
    assert row["job"] == alone["id"]
    assert "2 jobs: " in text and "4 traces compared as ranks" in text and "alone, not compared" in text


def test_four_unrelated_traces_are_never_compared(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    rank_trace(src / "qwen_h100.json", None, None, H100)
    # same device and same steps as qwen_h100: apart only by its file name
    rank_trace(src / "bert_h100.json", None, None, H100, decode_scale=5.0)
    rank_trace(src / "vllm_mi300x.json", None, None, MI300X, speculative=True)
    rank_trace(src / "b200_run.json", None, None, B200, decode_scale=10.0)
    doc, text = ingest_analyze(src, tmp_path)
    assert len(doc["jobs"]) == 4 and all(len(j["traces"]) == 1 and not j["compared"] for j in doc["jobs"])
    assert doc["comparisons"] == [] and "stragglers" not in doc and "worst_step" not in doc
    assert sorted(t["trace_id"].split("-")[0] for t in doc["traces"]) == [
        "b200_run",
        "bert_h100",
        "qwen_h100",
        "vllm_mi300x",
    ]
    assert "4 jobs: " in text and text.count("alone, not compared") == 4
    assert "straggler" not in text.lower() and "Slowest step" not in text


def test_two_jobs_of_two_ranks_each(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    # job A: H100, rank 0 slow (decode 2×); job B: MI300X, SGLang-style steps, rank 1 slow (decode 3×)
    rank_trace(src / "a_rank0.json", 0, 2, H100, decode_scale=2.0)
    rank_trace(src / "a_rank1.json", 1, 2, H100)
    rank_trace(src / "b_rank0.json", 0, 2, MI300X, speculative=True)
    rank_trace(src / "b_rank1.json", 1, 2, MI300X, speculative=True, decode_scale=3.0)
    doc, text = ingest_analyze(src, tmp_path)
    assert len(doc["jobs"]) == 2 and all(j["compared"] and len(j["traces"]) == 2 for j in doc["jobs"])
    cmps = {c["traces"][0]["trace_id"][:2]: c for c in doc["comparisons"]}
    assert sorted(cmps) == ["a_", "b_"]
    for name, c in cmps.items():
        assert [t["rank"] for t in c["traces"]] == [0, 1]
        assert all(t["trace_id"].startswith(name) for t in c["traces"])
    # job A: the last decode step 810 vs 410 µs; the median of 2 ranks is their mean 610 → ratio
    # 810 / 610 = 1.328, above the other decode steps' 830 / 630 = 1.317
    wa = cmps["a_"]["worst_step"]
    assert wa["slowest_rank"] == 0 and abs(wa["ratio"] - 810 / 610) < 1e-3
    # job B: the last verify step 10 + (300 + 100) × 3 = 1,210 vs 410 µs → median 810, ratio 1.494
    # (the other verify steps 1,230 / 830 = 1.482; draft steps equal on both ranks)
    wb = cmps["b_"]["worst_step"]
    assert wb["slowest_rank"] == 1 and abs(wb["ratio"] - 1210 / 810) < 1e-3
    assert "2 jobs: " in text and text.count("2 traces compared as ranks") == 2
    assert "Job 1: Stragglers" in text and "Job 2: Stragglers" in text


def test_report_lists_the_jobs(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    rank_trace(src / "a_rank0.json", 0, 2, H100)
    rank_trace(src / "a_rank1.json", 1, 2, H100, decode_scale=2.0)
    rank_trace(src / "lone_b200.json", None, None, B200)
    code, _, err = tk("ingest", str(src), "--out", str(tmp_path / "ds"), "--workers", "1")
    assert code == 0, err
    code, _, err = tk("report", str(tmp_path / "ds"), "--workers", "1", "--out", str(tmp_path / "r.md"))
    assert code == 0, err
    md = (tmp_path / "r.md").read_text()
    assert "2 jobs: " in md and "## Jobs" in md and "lone\\_b200" in md and "alone, not compared" in md
    assert (tmp_path / "r_plots" / "ranks_heatmap_job1.png").exists()


def test_family_and_distinct_ranks_by_hand() -> None:
    assert family("/d/rank-03.json.gz", 3) == "rank-{r}"
    assert family("/d/llama-TP-3-step.pt.trace.json", 3) == "llama-TP-{r}-step"
    assert family("/d/run1-rank1.json", 1) == family("/d/run1-rank0.json", 0) == "run1-rank{r}"
    assert family("/d/sampled_rank-1.json.gz", None) == "sampled_rank-{r}"
    assert family("/d/report1_64ee035d.sqlite", None) == "report1_64ee035d"  # no rank-like number
    assert family("/d/h100_run.json", None) == "h100_run" != family("/d/h200_run.json", None)
    assert family("/d/worker3.json", None) == "worker{r}" and family("/d/trace_tp2_pp1.json", None) == "trace_tp2_pp{r}"
    assert step_kinds(["-:ProfilerStep#5", "-:ProfilerStep#6"]) == "-:ProfilerStep#N"
    # two runs of a 2-rank job whose files have the same names: ranks 0, 1, 0, 1 with equal keys →
    # the first trace (by id) of each rank in job 1, the second in job 2; an unrelated key → job 3
    key = {"format": "kineto", "device": "H100", "world_size": 2, "backend": "nccl", "steps": "s", "family": "r{r}"}
    rows = [
        {"trace_id": "r0-aa", "rank": 0, **key},
        {"trace_id": "r0-bb", "rank": 0, **key},
        {"trace_id": "r1-aa", "rank": 1, **key},
        {"trace_id": "r1-bb", "rank": 1, **key},
        {"trace_id": "zz", "rank": 0, **key, "device": "B200"},
    ]
    g = group_jobs(pl.DataFrame(rows, schema=KEY_SCHEMA))
    assert dict(zip(g["trace_id"], g["job"])) == {"r0-aa": 1, "r1-aa": 1, "r0-bb": 2, "r1-bb": 2, "zz": 3}
    assert g.filter(pl.col("job") == 3)["traces"].to_list() == [1]


def test_outermost_regions_stand_for_steps_when_a_trace_has_none() -> None:
    from tracekit.analysis.ranks.jobs import job_keys
    from tracekit.analysis.ranks.per_trace import STEP_SCHEMA, RankPieces

    def piece(tid: str, rank: int, top: list[str]) -> RankPieces:
        empty = pl.DataFrame()
        meta = {"format": "nsys", "device": "NVIDIA H200", "world_size": 2, "backend": None, "top_regions": top}
        return RankPieces(
            tid, rank, f"/d/run_rank{rank}.sqlite", None, empty, pl.DataFrame(schema=STEP_SCHEMA), empty, empty,
            meta_key=meta,
        )  # fmt: skip

    # ranks 0 and 1 with the same outermost regions (digits aside: layer_3 is layer_N) are one job;
    # a rank 1 whose outermost regions are other work is a job of its own
    keys = job_keys(
        [
            piece("a", 0, ["forward", "layer_3"]),
            piece("b", 1, ["layer_7", "forward"]),
            piece("c", 1, ["compile", "forward"]),
        ]
    )
    assert keys["steps"].to_list() == ["forward; layer_N", "forward; layer_N", "compile; forward"]
    assert keys["family"].unique().to_list() == ["run_rank{r}"]
    g = group_jobs(keys)
    assert dict(zip(g["trace_id"], g["job"])) == {"a": 1, "b": 1, "c": 2}


def test_sglang_stage_files_of_one_run_are_paired_jobs(tmp_path: Path) -> None:
    """Issue 26 item 7: SGLang's per-stage files ``{run}-TP-{t}-EXTEND`` / ``-DECODE`` of one run.
    No distributedInfo: the rank comes from TP-{t}. The two stages are two jobs of two ranks each
    (a prefill-stage file is not a rank of the decode stage), paired with each other; another run's
    file is a job of its own."""
    src = tmp_path / "in"
    src.mkdir()
    for stage in ("EXTEND", "DECODE"):
        for t in range(2):
            rank_trace(src / f"1733400000-TP-{t}-{stage}.trace.json", None, None, H100)
    rank_trace(src / "1733499999-TP-0-DECODE.trace.json", None, None, H100)  # another run
    doc, text = ingest_analyze(src, tmp_path)
    jobs = {(j["key"]["run"], j["key"]["stage"]): j for j in doc["jobs"]}
    assert set(jobs) == {("1733400000", "prefill"), ("1733400000", "decode"), ("1733499999", "decode")}
    pre, dec, other = jobs[("1733400000", "prefill")], jobs[("1733400000", "decode")], jobs[("1733499999", "decode")]
    assert pre["compared"] and dec["compared"] and not other["compared"]
    assert sorted(pre["ranks"]) == [0, 1] and sorted(dec["ranks"]) == [0, 1]  # from TP-0 / TP-1
    assert pre["paired"] == [{"job": dec["id"], "stage": "decode"}]
    assert dec["paired"] == [{"job": pre["id"], "stage": "prefill"}]
    assert other["paired"] == []
    assert f"prefill stage, paired with job {dec['id']} (decode)" in text


def test_ingest_of_a_folder_lists_engine_runs(tmp_path: Path) -> None:
    """Issue 26 item 7: ingest of a folder groups SGLang's files by run (two runs, one with both stages)."""
    src = tmp_path / "in"
    src.mkdir()
    for stage in ("EXTEND", "DECODE"):
        rank_trace(src / f"1733400000-TP-0-{stage}.trace.json", None, None, H100)
    rank_trace(src / "1733499999-TP-0.trace.json", None, None, H100)
    code, out, err = tk("ingest", str(src), "--out", str(tmp_path / "ds"), "--workers", "1")
    assert code == 0, err
    line = next(x for x in (out + err).splitlines() if "engine run" in x)
    assert line == (
        "2 engine runs by file name: sglang 1733400000: 2 traces (prefill 1, decode 1); sglang 1733499999: 1 trace"
    )
