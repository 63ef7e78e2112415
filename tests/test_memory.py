"""Device memory over the phases (issue 38): the memory table from Kineto [memory] events (both
readers), the timeline per step and phase, the KV check against the model, the headroom, the plot,
diff rows and the gate, bad input. Every figure is derived by hand in a comment."""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk  # noqa: E402

from tracekit.analysis.memory.events import memory_events  # noqa: E402
from tracekit.analysis.memory.summary import memory_summary  # noqa: E402
from tracekit.analysis.pipeline import analyze  # noqa: E402
from tracekit.annotate import format_phase_name  # noqa: E402
from tracekit.sources import load  # noqa: E402
from tracekit.tables import schema  # noqa: E402
from tracekit.tables.trace import read_dataset, write_dataset  # noqa: E402

DF = Path("/work/shared/traces/kineto/hta/df_index_resolver/df_index_resolver.json.gz")
GIB = 1 << 30
H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "numSms": 132}]
# a Llama-8B-shaped config: 2 · 32 layers · 8 KV heads · 128 · 2 B (bf16) = 131,072 B per token
MODEL = {
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_attention_heads": 32,
    "hidden_size": 4096,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
}


def mem(ts_us: float, nbytes: int, total: int | None, addr: int, reserved: int | None = None, tid: int = 1) -> dict:
    args: dict[str, Any] = {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes}
    if total is not None:
        args["Total Allocated"] = total
    if reserved is not None:
        args["Total Reserved"] = reserved
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts_us,
            "args": args}  # fmt: skip


def x(cat: str, name: str, t0: float, t1: float, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": t0, "dur": t1 - t0, "args": args}


def engine_trace(folder: Path, name: str, pool: int, temp: int, decode_steps: int = 8, grow: int = 0) -> Path:
    """A vLLM-style GPU trace (µs): ``vllm::allocate_kv_cache`` allocates a pool of ``pool`` bytes at
    t = 10 and never frees it; then one prefill (batch 4) and ``decode_steps`` decode steps (batch 4),
    each step 1,000 µs with one ``aten::mm`` that allocates ``temp`` bytes (freed in the step) and,
    with ``grow``, ``grow`` bytes kept (a cache that grows); a kernel per step on device 0."""
    ev = [x("cpu_op", "vllm::allocate_kv_cache", 5, 20), mem(10, pool, pool, 0x1000, reserved=pool + GIB)]
    total, t = pool, 100.0
    for i in range(1 + decode_steps):
        phase = "prefill" if i == 0 else "decode"
        ev.append(x("user_annotation", format_phase_name(phase, step=i, batch=4), t, t + 1000))
        ev.append(x("cpu_op", "aten::mm", t + 10, t + 900))
        ev.append(x("cuda_runtime", "cudaLaunchKernel", t + 20, t + 30, correlation=i + 1))
        k = x("kernel", "gemm_kernel", t + 40, t + 800, device=0, stream=7, correlation=i + 1)
        k["tid"] = 7
        ev.append(k)
        ev.append(mem(t + 15, temp, total + temp, 0x10_0000 + i * 0x1000, reserved=pool + GIB, tid=1))
        if grow:
            total += grow
            ev.append(mem(t + 16, grow, total + temp, 0x20_0000 + i * 0x1000, reserved=pool + GIB))
        ev.append(mem(t + 850, -temp, total, 0x10_0000 + i * 0x1000, reserved=pool + GIB))
        t += 1000
    p = folder / f"{name}.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": H100, "traceEvents": ev}))
    return p


def test_df_index_resolver_peak_by_hand() -> None:
    if not DF.exists():
        pytest.skip("shared trace not present")
    raw = json.load(gzip.open(DF))["traceEvents"]
    events = [e for e in raw if e.get("ph") == "i" and e.get("name") == "[memory]"]
    gpu = [e for e in events if e["args"]["Device Type"] == 1]
    assert (len(events), len(gpu)) == (28_010, 26_770)
    # by hand: the largest Total Allocated among the GPU events, the first event that reached it
    top = max(e["args"]["Total Allocated"] for e in gpu)
    first = next(e for e in gpu if e["args"]["Total Allocated"] == top)
    t_ns = round(first["ts"] * 1000)  # µs → ns (the trace's ts are whole µs)
    # the op that allocated: the innermost cpu_op of its thread holding it (latest start, then shortest)
    holding = [
        e
        for e in raw
        if e.get("cat") == "cpu_op"
        and (e["pid"], e["tid"]) == (first["pid"], first["tid"])
        and e["ts"] <= first["ts"] <= e["ts"] + e["dur"]
    ]
    op = max(holding, key=lambda e: (e["ts"], -e["dur"]))["name"]
    trace = load(DF)
    assert trace.memory.height == 28_010 and (trace.memory["device_type"] == "cuda").sum() == 26_770
    m = analyze(trace).memory
    assert m["device"] == "cuda:1" and m["counts"]["events"] == 26_770
    assert m["counts"]["other_devices"] == {"cpu": 1_240}
    assert m["peak"]["allocated_bytes"] == top == 6_629_508_096
    assert m["peak"]["time_ns"] == t_ns
    assert m["peak"]["op"] == op == "aten::empty"
    # the V100's 34,089,730,048 B less the peak reserved (12,782,141,440 B) = 21,307,588,608 B
    assert m["peak"]["reserved_peak_bytes"] == max(e["args"]["Total Reserved"] for e in gpu) == 12_782_141_440
    assert m["headroom"]["headroom_bytes"] == 34_089_730_048 - 12_782_141_440


def test_both_readers_give_the_same_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = engine_trace(tmp_path, "t", pool=GIB, temp=1000)
    doc = json.loads(p.read_text())
    # an escaped name sends this event down the Python path inside a native read; an OOM instant
    # event of the same category is not an allocation
    doc["traceEvents"].append({**mem(99, 5, GIB + 5, 0x9000), "name": "[mem\\u006fry]"})
    doc["traceEvents"].append({**mem(98, 0, GIB, 0), "name": "[OutOfMemory]"})
    p.write_text(json.dumps(doc).replace("[mem\\\\u006fry]", "[mem\\u006fry]"))
    native = load(p).memory
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", "1")
    pure = load(p).memory
    assert native.equals(pure)
    # 1 pool + 9 steps × 2 (temp alloc and free) + the escaped one = 20 rows, in time order
    assert native.height == 20 and native["time_ns"].is_sorted()
    assert native.schema == pl.Schema(schema.MEMORY)
    row = native.filter(pl.col("time_ns") == 99_000).row(0, named=True)
    assert (row["bytes"], row["total_allocated"], row["device_type"], row["device_id"]) == (5, GIB + 5, "cuda", 0)


def test_vllm_style_pool_no_growth(tmp_path: Path) -> None:
    """A 4 GiB pool allocated at start, decode steps whose temporaries are freed: no growth."""
    p = engine_trace(tmp_path, "vllm", pool=4 * GIB, temp=10_000_000)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(MODEL))
    code, out, err = tk("analyze", p, "--model", cfg, "--format", "json")
    assert code == 0, err
    m = json.loads(out)["totals"]["memory"]
    kv = m["kv"]
    # B = 2 · 32 · 8 · 128 · 2 = 131,072 B/token; M = 4 GiB / B = 4,294,967,296 / 131,072 = 32,768 tokens
    assert kv["bytes_per_token"] == 131_072
    assert kv["measured_per_token_bytes"] == 0  # each step frees what it allocated
    assert (kv["pool_bytes"], kv["pool_tokens"]) == (4 * GIB, 32_768)
    assert kv["verdict"].startswith("no growth: pre-allocated pool of 4.29 GB = 32,768 tokens at 131,072 bytes/token")
    assert "largest allocation live at the trace's end (vllm::allocate_kv_cache)" in kv["verdict"]
    decode = next(r for r in m["phases"] if r["phase"] == "decode")
    # 8 decode steps: start = end = the pool; peak = pool + 10 MB temporary, at aten::mm
    assert (decode["steps"], decode["allocated_start_bytes"], decode["allocated_end_bytes"]) == (8, 4 * GIB, 4 * GIB)
    assert decode["peak_allocated_bytes"] == 4 * GIB + 10_000_000 and decode["peak_op"] == "aten::mm"
    # reserved 5 GiB, so reserved − allocated at the peak = 1 GiB − 10 MB
    assert decode["reserved_over_allocated_bytes"] == GIB - 10_000_000
    assert m["never_freed"]["count"] == 1 and m["never_freed"]["by_op"][0]["op"] == "vllm::allocate_kv_cache"
    # headroom: 85,000,000,000 − 5 GiB reserved = 79,631,290,880 B = 607,538 tokens of 131,072 B
    h = m["headroom"]
    assert h["headroom_bytes"] == 85_000_000_000 - 5 * GIB == 79_631_290_880
    assert h["headroom_tokens"] == 79_631_290_880 // 131_072 == 607_538
    code, text, _ = tk("analyze", p, "--model", cfg)
    assert "no growth: pre-allocated pool of 4.29 GB = 32,768 tokens" in text and "Memory" in text


def test_growing_cache_matches_the_model(tmp_path: Path) -> None:
    """Each decode step keeps 4 × 131,072 B (batch 4, one token each): the model's prediction."""
    p = engine_trace(tmp_path, "grow", pool=GIB, temp=1000, grow=4 * 131_072)
    trace = load(p)
    trace.meta["model"] = {
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "dtype": "bfloat16",
        "source": "t",
    }
    m = analyze(trace).memory
    dec = next(r for r in m["phases"] if r["phase"] == "decode")
    # growth per step = 524,288 B; per token = 8 × 524,288 / (8 × 4) = 131,072 B
    assert dec["growth_per_step_bytes"] == 524_288 and dec["growth_per_token_bytes"] == 131_072
    assert m["kv"]["verdict"].startswith("grows as the model predicts (within 0.0 %)")


def test_runner_sidecar_pool(tmp_path: Path) -> None:
    """The runner's own model and cache shape (sidecar), no --model."""
    p = engine_trace(tmp_path, "llm", pool=GIB, temp=1000)
    stem = p.with_suffix("")
    # 2 · 2 layers · 4 KV heads · 32 · 4 B (float32) = 2,048 B/token; pool = 2 · (2·3·4·1024·32) · 4 B
    # = 6,291,456 B = 3,072 tokens (3 slots × 1,024 positions)
    side = {
        "config": {"model": {"layers": 2, "d_model": 128, "heads": 4, "kv_heads": 0, "dtype": "float32"}},
        "shapes": {"head_dim": 32, "kv_heads": 4, "kv_cache": [2, 3, 4, 1024, 32], "kv_cache_layout": "pool"},
    }
    Path(str(stem) + ".tracekit.json").write_text(json.dumps(side))
    m = analyze(load(p)).memory
    assert m["kv"]["bytes_per_token"] == 2_048
    assert (m["kv"]["pool_bytes"], m["kv"]["pool_tokens"]) == (6_291_456, 3_072)
    assert "the runner's cache" in m["kv"]["verdict"]


def test_plot_and_report(tmp_path: Path) -> None:
    p = engine_trace(tmp_path, "plot", pool=GIB, temp=10_000_000)
    code, _, err = tk("plot", "memory", p, "-o", tmp_path / "m.png")
    assert code == 0, err
    assert (tmp_path / "m.png").stat().st_size > 10_000
    code, out, err = tk("report", p, "-o", tmp_path / "r.md")
    assert code == 0, err
    assert "Memory" in (tmp_path / "r.md").read_text()


def test_diff_rows_and_gate(tmp_path: Path) -> None:
    """A decode peak grown 30 % fails the gate; a re-run passes."""
    base = engine_trace(tmp_path, "base", pool=GIB, temp=100_000_000)
    rerun = engine_trace(tmp_path, "rerun", pool=GIB, temp=100_000_000)
    # decode peak: 1 GiB + 100 MB = 1,173,741,824 B; × 1.3 = 1,525,864,371 → temp 452,122,547 B
    bigger = engine_trace(tmp_path, "bigger", pool=GIB, temp=452_122_547)
    code, out, err = tk("diff", base, rerun, "--format", "json", "--gate", "5%")
    assert code == 0, err
    doc = json.loads(out)
    check = next(c for c in doc["gate"]["checks"] if (c["phase"], c["metric"]) == ("decode", "peak allocated"))
    assert check["a"] == check["b"] == GIB + 100_000_000 and not check["regressed"]
    code, out, err = tk("diff", base, bigger, "--format", "json", "--gate", "5%")
    assert code == 1
    doc = json.loads(out)
    check = next(c for c in doc["gate"]["checks"] if (c["phase"], c["metric"]) == ("decode", "peak allocated"))
    assert check["change"] == pytest.approx(0.30, abs=1e-6) and check["regressed"]
    assert "gate: FAIL: prefill peak allocated max +30.0 %" in err and "(and 1 other check)" in err  # decode
    rows = {(r["phase"], r["metric"]): r for r in doc["memory"]}
    assert rows[("decode", "peak_allocated_bytes")]["b"] == GIB + 452_122_547
    code, text, _ = tk("diff", base, bigger)
    assert "device memory per phase" in text


def test_bad_input_counted(tmp_path: Path) -> None:
    """Missing and negative totals, a free of a block never seen, a reused address, odd values."""
    ev = [
        x("cpu_op", "aten::empty", 0, 100),
        mem(10, 100, 100, 0xA),  # allocation at A
        mem(20, 50, 150, 0xA),  # A again, never freed: reused address (counted)
        mem(30, -70, 80, 0xB),  # a free of B, never allocated here
        mem(40, 10, None, 0xC),  # no total (left out of the timeline)
        mem(50, 10, -5, 0xD),  # negative total
        {**mem(60, 1, 1, 0xE), "ts": "sixty"},  # no usable time: dropped, counted
        {**mem(70, "many", 160, 0xF)},  # a non-numeric size: nulled, counted as coerced
    ]
    ev[-1]["args"]["Bytes"] = "many"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": H100, "traceEvents": ev}))
    trace = load(p)
    assert trace.memory.height == 6
    r = analyze(trace)
    c = r.memory["counts"]
    assert (c["total_missing"], c["total_negative"], c["address_reused"], c["free_without_allocation"]) == (1, 1, 1, 1)
    assert c["bytes_missing"] == 1
    assert any("memory: 1 event without a total allocated" in w for w in r.warnings)
    assert r.memory["peak"]["allocated_bytes"] == 160
    code, _, err = tk("analyze", p)
    assert code == 0 and "Traceback" not in err


def test_a_million_events_bounded() -> None:
    """10⁶ events on one thread (alloc/free pairs, 1 µs apart): analysed in seconds, lists bounded."""
    n = 1_000_000
    i = pl.int_range(n, dtype=pl.Int64, eager=True)
    size = pl.select(pl.when(i % 2 == 0).then(4096).otherwise(-4096)).to_series()  # alloc, free, alloc, ...
    frame = pl.DataFrame(
        {
            "trace_id": pl.repeat("t", n, eager=True),
            "time_ns": i * 1000,
            "pid": pl.repeat(1, n, dtype=pl.Int64, eager=True),
            "tid": pl.repeat(1, n, dtype=pl.Int64, eager=True),
            "device_type": pl.repeat("cuda", n, eager=True),
            "device_id": pl.repeat(0, n, dtype=pl.Int64, eager=True),
            "addr": (i // 2) % 1000,  # addresses reused every 1,000 pairs (each freed before reuse)
            "bytes": size,
            "total_allocated": pl.select(pl.when(i % 2 == 0).then(4096).otherwise(0)).to_series(),
            "total_reserved": pl.repeat(1 << 20, n, dtype=pl.Int64, eager=True),
        }
    )
    ops = schema.empty("ops")
    t0 = time.perf_counter()
    m = memory_events(frame, schema.empty("kernels"), ops, schema.empty("regions"), cpu_only=False)
    out = memory_summary(m, pl.DataFrame(), None, None, None, None)
    took = time.perf_counter() - t0
    assert out["peak"]["allocated_bytes"] == 4096 and out["peak"]["time_ns"] == 0
    assert out["counts"]["address_reused"] == 0 and out["never_freed"]["count"] == 0
    assert len(out["series"]["time_ns"]) <= 800
    assert took < 30


def test_datasets_keep_the_table_and_old_ones_read(tmp_path: Path) -> None:
    p = engine_trace(tmp_path, "ds", pool=GIB, temp=1000)
    trace = load(p)
    write_dataset(trace, tmp_path / "ds")
    back = read_dataset(tmp_path / "ds")
    assert back.memory.equals(trace.memory)
    code, out, _ = tk("analyze", tmp_path / "ds", "--format", "json")
    assert code == 0 and json.loads(out)["totals"]["memory"]["peak"]["allocated_bytes"] == GIB + 1000
    # a dataset written before the table (no memory partition) reads with an empty one
    import shutil

    shutil.rmtree(tmp_path / "ds" / "memory")
    old = read_dataset(tmp_path / "ds")
    assert old.memory.height == 0 and old.memory.schema == pl.Schema(schema.MEMORY)
    code, out, _ = tk("analyze", tmp_path / "ds", "--format", "json")
    assert code == 0 and "memory" not in json.loads(out)["totals"]
    # ingest (the bounded-memory path) stores it too
    code, _, err = tk("ingest", p, "-o", tmp_path / "ing")
    assert code == 0, err
    assert read_dataset(tmp_path / "ing").memory.equals(trace.memory)


def test_nsight_memory_usage(tmp_path: Path) -> None:
    """An export with CUDA_GPU_MEMORY_USAGE_EVENTS (the schema of nsys --cuda-memory-usage=true):
    device allocations and frees become the table, host memory is left out, a bad row counted."""
    import sqlite3

    from nsys_export import write_export

    p = write_export(
        tmp_path / "m.sqlite", [(1_000, 2_000, "gemm", 1)], ranges=[(500, 3_000, "tk:decode step=0 batch=1")]
    )
    conn = sqlite3.connect(p)
    conn.execute(
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, "
        "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, "
        "bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name INTEGER, "
        "correlationId INTEGER, localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER, "
        "localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER, "
        "importedMemoryPoolProcessId INTEGER)"
    )
    rows = [  # (start, address, bytes, memKind, memoryOperationType)
        (600, 0xA000, 1_000_000, 2, 0),  # device alloc: total 1,000,000
        (700, 0xB000, 500_000, 2, 0),  # device alloc: total 1,500,000 (the peak)
        (800, 0xC000, 9_999_999, 1, 0),  # pinned host: not the device's
        (900, 0xB000, 500_000, 2, 1),  # free: total 1,000,000
        (950, 0xD000, 1, 2, 7),  # an unknown operation type: dropped, counted
    ]
    conn.executemany(
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, "
        "memKind, memoryOperationType) VALUES (?, ?, 0, 1, ?, 0, ?, ?, ?)",
        [(s, 1 << 24, a, b, k, o) for s, a, b, k, o in rows],
    )
    conn.commit()
    conn.close()
    trace = load(p)
    m = trace.memory
    assert m["bytes"].to_list() == [1_000_000, 500_000, -500_000]
    assert m["total_allocated"].to_list() == [1_000_000, 1_500_000, 1_000_000]
    assert set(m["device_type"]) == {"cuda"} and m["pid"].to_list() == [1, 1, 1]
    assert trace.meta["parse_stats"]["dropped"] == {
        "CUDA_GPU_MEMORY_USAGE_EVENTS: memoryOperationType neither allocation (0) nor free (1)": 1
    }
    out = analyze(trace).memory
    assert (out["device"], out["peak"]["allocated_bytes"], out["peak"]["time_ns"]) == ("cuda:0", 1_500_000, 700)
    # the export without the table: no memory events, nothing said
    q = write_export(tmp_path / "plain.sqlite", [(1_000, 2_000, "gemm", 1)])
    plain = load(q)
    assert plain.memory.height == 0 and analyze(plain).memory == {}
    code, _, err = tk("ingest", p, "-o", tmp_path / "ds")
    assert code == 0, err
    assert read_dataset(tmp_path / "ds").memory.equals(m)


def test_headroom_from_a_hardware_file(tmp_path: Path) -> None:
    """A trace without device properties: the headroom's size from --hardware FILE's memory_bytes."""
    p = engine_trace(tmp_path, "nodev", pool=GIB, temp=1000)
    doc = json.loads(p.read_text())
    doc["deviceProperties"] = []
    p.write_text(json.dumps(doc))
    hw = tmp_path / "hw.json"
    hw.write_text(
        json.dumps(
            {
                "name": "lab GPU",
                "peak_flops_per_s": {"bf16": 1e15},
                "mem_bandwidth_bytes_per_s": 3e12,
                "memory_bytes": 80 * GIB,
            }
        )
    )
    code, out, err = tk("analyze", p, "--hardware", hw, "--format", "json")
    assert code == 0, err
    h = json.loads(out)["totals"]["memory"]["headroom"]
    # 80 GiB less the peak reserved (pool + 1 GiB = 2 GiB) = 78 GiB
    assert h["device_memory_bytes"] == 80 * GIB and h["headroom_bytes"] == 78 * GIB
    assert h["source"] == "--hardware lab GPU (memory_bytes)"
    code, out, _ = tk("analyze", p, "--format", "json")
    assert json.loads(out)["totals"]["memory"]["headroom"]["why_none"]
