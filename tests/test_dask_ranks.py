"""Analysis across ranks: exposed communication (by hand and on the shared NCCL trace), the straggler
view on rank traces built from the NCCL trace with one slowed rank, selection by --rank /
--trace-id prefixes, and the ranks report (sections, heat map, JSON). Serial (--workers 1): the
Dask path of the same tasks is tested in test_dask_ingest.py on a real cluster."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracekit.analysis.communication import comm_by_phase, exposed
from tracekit.analysis.ranks.compare import parse_ranks
from tracekit.errors import UsageError
from cli_run import tk

NCCL = "kineto/hta/nccl_parser_config/nccl_data.json.gz"
REPO = Path(__file__).resolve().parent.parent


def kern(rows: list[tuple[str, int, int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "name": pl.String(),
            "device": pl.Int64(),
            "stream": pl.Int64(),
            "start_ns": pl.Int64(),
            "end_ns": pl.Int64(),
        },
        orient="row",
    ).with_columns(pl.lit("kernel").alias("kind"))


def test_exposed_communication_by_hand() -> None:
    k = kern(
        [
            ("ncclKernel_AllReduce_RING", 0, 2, 0, 100),  # comm [0,100) on device 0
            ("ampere_sgemm_128x64", 0, 1, 50, 80),  # compute [50,80)
            ("vectorized_elementwise_kernel", 0, 3, 60, 70),  # inside [50,80): the union counts it once
            ("ampere_sgemm_128x64", 0, 1, 90, 150),  # compute [90,150): covers [90,100)
            ("ncclKernel_AllGather_RING", 1, 5, 10, 40),  # device 1 has no compute: all exposed
            ("ampere_sgemm_128x64", 1, 5, 40, 60),  # same stream, after it: no overlap
            ("ncclKernel_SendRecv", 0, 2, 200, 210),  # after everything: exposed
        ]
    )
    e = exposed(k).sort("device", "start_ns")
    # [0,100): covered 30 ([50,80)) + 10 ([90,100)) = 40 → exposed 60; [10,40) on device 1 → 30; [200,210) → 10.
    assert e.select("dur_ns", "covered_ns", "exposed_ns").rows() == [(100, 40, 60), (10, 0, 10), (30, 0, 30)]
    units = pl.DataFrame({"phase": ["prefill", "decode"], "w_start": [0, 150], "w_end": [120, 300]})
    by = {r["phase"]: r for r in comm_by_phase(k, units).to_dicts()}
    # prefill window [0,120) holds the kernels starting at 0 and 10; decode holds the one at 200.
    assert (by["trace"]["comm_count"], by["trace"]["comm_ns"], by["trace"]["exposed_ns"]) == (3, 140, 100)
    assert (by["prefill"]["comm_ns"], by["prefill"]["exposed_ns"]) == (130, 90)
    assert (by["decode"]["comm_ns"], by["decode"]["exposed_ns"], by["decode"]["exposed_fraction"]) == (10, 10, 1.0)


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Plain loop: the length of the union of ``(start, end)`` intervals."""
    cov, cur = 0, None
    for a, b in sorted(intervals):
        if cur is None or a > cur[1]:
            cov += (cur[1] - cur[0]) if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return cov + ((cur[1] - cur[0]) if cur else 0)


def brute_force_exposed(kernels: pl.DataFrame) -> tuple[int, int]:
    """Plain loops: each NCCL kernel's time not covered by the union of the other kernels."""
    rows = kernels.filter(pl.col("kind") == "kernel").select("name", "start_ns", "end_ns").rows()
    compute = [(s, e) for n, s, e in rows if "nccl" not in n.lower()]
    total = exp = 0
    for n, s, e in rows:
        if "nccl" not in n.lower():
            continue
        cov = union_ns((max(s, a), min(e, b)) for a, b in compute if a < e and b > s)
        total += e - s
        exp += e - s - cov
    return total, exp


@pytest.fixture(scope="module")
def ranks_ds(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> tuple[Path, dict[str, Any]]:
    """3 rank traces of the NCCL trace, rank 1's step 1 dilated 1.5×; ingested serially."""
    spec = importlib.util.spec_from_file_location("rank_traces", REPO / "benchmarks" / "rank_traces.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("ranks")
    info = mod.make_rank_traces(shared_traces / NCCL, root / "in", ranks=3, slow_rank=1, slow_step=1)
    code, _, err = tk("ingest", str(root / "in"), "--out", str(root / "ds"), "--workers", "1")
    assert code == 0, err
    return root / "ds", info


def test_straggler_view_names_the_slowed_rank_and_step(
    ranks_ds: tuple[Path, dict[str, Any]], shared_traces: Path
) -> None:
    ds, info = ranks_ds
    code, out, err = tk("analyze", str(ds), "--workers", "1", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "ranks" and doc["ranks_from"] == "meta" and [t["rank"] for t in doc["traces"]] == [0, 1, 2]
    w = doc["worst_step"]
    assert (w["slowest_rank"], w["step"], w["name"], w["straggler"]) == (1, 1, "ProfilerStep#5", True)
    # Rank 1's step 1 grows by (b − a)(1.5 − 1) where [a, b] is ProfilerStep#5's CPU range (µs → ns,
    # each timestamp rounded to the ns: ±2 ns); the other ranks are the same trace shifted, so the
    # median is the unchanged step time and the ratio is (base + extra) / base.
    assert abs(w["excess_ns"] - info["extra_ns"]) <= 2
    base = w["median_ns"]
    assert abs(w["max_ns"] - (base + info["extra_ns"])) <= 2
    assert not any(s["straggler"] for s in doc["stragglers"] if s["step"] != 1)
    # Idle by cause (tracekit/analysis/idle/causes.py): dilating the step stretches its idle time too; the
    # cause with most extra idle on rank 1 is named, and the step's largest culprit in words.
    from tracekit.analysis.idle.causes import CAUSES

    assert w["idle_excess_ns"] > 0 and w["idle_cause"] in CAUSES and 0 < w["idle_cause_excess_ns"]
    assert isinstance(w["idle_top"], str) and w["idle_top"]
    # Per rank × phase: a 'trace' row per rank; no phase units in this training trace, 3 ProfilerSteps each.
    rows = [r for r in doc["per_rank"] if r["phase"] == "trace"]
    assert [r["step_count"] for r in rows] == [3, 3, 3]
    assert len(doc["step_time"]) == 9
    # Communication: rank 0 is the unmodified NCCL trace (shifted): equal to plain loops over its kernels.
    import tracekit

    total, exp = brute_force_exposed(tracekit.load(shared_traces / NCCL).kernels)
    r0 = next(c for c in doc["communication"] if c["rank"] == 0 and c["phase"] == "trace")
    assert (r0["comm_count"], r0["comm_ns"], r0["exposed_ns"]) == (21, total, exp)
    assert 0 < exp < total  # some of it overlaps the backward pass's compute, most does not
    # the messages the kernels state, through the dataset too (test_nccl_trace_exposed_communication_per_phase)
    assert r0["comm_bytes"] == 307_323_096 and r0["sized_ns"] == total
    code, text, err = tk("analyze", str(ds), "--workers", "1")
    assert code == 0, err
    assert "moved" in text and "bandwidth" in text and "307 MB" in text


def test_nccl_trace_exposed_communication_per_phase(shared_traces: Path) -> None:
    import tracekit

    tr = tracekit.load(shared_traces / NCCL)
    total, exp = brute_force_exposed(tr.kernels)
    # No phase annotations in this training trace: everything is "unphased", plus the whole-trace row.
    df = comm_by_phase(
        tr.kernels, pl.DataFrame(schema={"phase": pl.String(), "w_start": pl.Int64(), "w_end": pl.Int64()})
    )
    assert df["phase"].to_list() == ["trace", "unphased"]
    # bytes moved: each NCCL kernel's own args, In msg nelems × 4 (dtype Float), summed by hand
    import gzip
    import json

    raw = json.loads(gzip.decompress((shared_traces / NCCL).read_bytes()))["traceEvents"]
    sizes = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4}
    moved = sum(
        e["args"]["In msg nelems"] * sizes[e["args"]["dtype"]]
        for e in raw
        if e.get("cat") == "kernel" and "nccl" in e["name"].lower() and "In msg nelems" in e.get("args", {})
    )
    assert moved == 307_323_096
    assert df.row(0, named=True) | {"exposed_fraction": 0, "algbw_bytes_per_s": 0} == {
        "phase": "trace",
        "comm_count": 21,
        "comm_ns": total,
        "exposed_ns": exp,
        "exposed_fraction": 0,
        "comm_bytes": moved,
        "sized_ns": total,  # every collective kernel of this trace states its message
        "algbw_bytes_per_s": 0,
        "busbw_bytes_per_s": None,  # all-reduce's bus factor 2(n−1)/n needs the world size, not given here
    }
    assert df["algbw_bytes_per_s"][0] == pytest.approx(moved / (total * 1e-9))
    # with the trace's world size 2: all-reduce 2·1/2 = 1 and broadcast 1, so busbw = algbw
    df2 = comm_by_phase(
        tr.kernels, pl.DataFrame(schema={"phase": pl.String(), "w_start": pl.Int64(), "w_end": pl.Int64()}), 2
    )
    assert df2["busbw_bytes_per_s"][0] == pytest.approx(moved / (total * 1e-9))


def test_selection_by_rank_and_prefix(ranks_ds: tuple[Path, dict[str, Any]]) -> None:
    ds, _ = ranks_ds
    code, out, _ = tk("analyze", str(ds), "--workers", "1", "--rank", "0,2", "--format", "json")
    assert code == 0 and [t["rank"] for t in json.loads(out)["traces"]] == [0, 2]
    code, out, _ = tk("analyze", str(ds), "--rank", "1", "--format", "json")  # one trace: the usual analysis
    assert code == 0 and json.loads(out)["trace"]["rank"] == 1
    code, out, _ = tk(
        "analyze", str(ds), "--workers", "1", "--compare", "rank-00", "--compare", "rank-02", "--format", "json"
    )
    assert code == 0 and [t["rank"] for t in json.loads(out)["traces"]] == [0, 2]
    code, out, _ = tk("analyze", str(ds), "--trace-id", "rank-01", "--format", "json")  # one trace, by prefix
    assert code == 0 and json.loads(out)["trace"]["rank"] == 1
    code, _, err = tk("analyze", str(ds), "--rank", "7")
    assert code != 0 and "no trace matches" in err and "Traceback" not in err
    assert parse_ranks("0,2,4-6") == [0, 2, 4, 5, 6]
    with pytest.raises(UsageError):
        parse_ranks("a-b")


def test_ranks_report_sections_heatmap_and_json(ranks_ds: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    ds, _ = ranks_ds
    code, _, err = tk("report", str(ds), "--workers", "1", "--format", "html", "--out", str(tmp_path / "r.html"))
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    for anchor in ("ranks", "per-rank", "stragglers", "communication", "plot-ranks_heatmap"):
        assert f'id="{anchor}"' in html
    assert "on rank 1" in html and "data:image/png;base64," in html
    code, _, err = tk("report", str(ds), "--workers", "1", "--out", str(tmp_path / "r.md"))
    assert code == 0, err
    assert (tmp_path / "r_plots" / "ranks_heatmap.png").stat().st_size > 1000
    assert "![Step time by rank × step](r_plots/ranks_heatmap.png)" in (tmp_path / "r.md").read_text()
    code, out, _ = tk("report", str(ds), "--workers", "1", "--format", "json")
    assert code == 0 and json.loads(out)["worst_step"]["slowest_rank"] == 1


def test_exposed_communication_equals_plain_loops_on_random_kernels() -> None:
    # comm.exposed merges only the compute kernels that overlap a communication kernel of their
    # device (comm._touching): each kernel's covered time equals plain loops over all of them, with
    # kernels touching, nested, zero-long, before, between and after the communication kernels.
    import random

    rng = random.Random(7)
    for _ in range(30):
        rows = []
        for dev in (0, 1):
            for i in range(rng.randint(0, 6)):
                s = rng.randint(0, 200)
                rows.append((f"ncclKernel_AllReduce_{i}", dev, 2, s, s + rng.randint(0, 40)))
            for i in range(rng.randint(0, 12)):
                s = rng.randint(0, 200)
                rows.append((f"sgemm_{i}", dev, 1, s, s + rng.randint(0, 60)))
        k = kern(rows)
        e = exposed(k)
        for r in e.iter_rows(named=True):
            cov = union_ns(
                (max(a, r["start_ns"]), min(b, r["end_ns"]))
                for n, d, _, a, b in rows
                if "nccl" not in n and d == r["device"] and a < r["end_ns"] and b > r["start_ns"]
            )
            assert r["covered_ns"] == cov and r["exposed_ns"] == r["end_ns"] - r["start_ns"] - cov, (rows, r)
