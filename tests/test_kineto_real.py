"""Kineto loader on the shared real traces: values checked against an independent plain-JSON read."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from conftest import SHARED_TRACES, kineto_trace_files
from tracekit.sources.kineto.loader import load_kineto
from tracekit.analysis.trace_summary import stream_busy
from tracekit.tables.trace import Trace
from golden.reference import union_ns

DFI = "kineto/hta/df_index_resolver/df_index_resolver.json.gz"
CONTROL = "kineto/hta/trace_diff/control/control.json.gz"
NS_RES = "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
AMD = "kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@lru_cache(maxsize=4)
def loaded(rel: str) -> Trace:
    return load_kineto(SHARED_TRACES / rel)


@lru_cache(maxsize=4)
def plain(rel: str) -> dict[str, Any]:
    """The independent oracle: the stdlib json module on the whole document."""
    doc: dict[str, Any] = json.loads(gzip.decompress((SHARED_TRACES / rel).read_bytes()))
    return doc


@pytest.mark.parametrize("path", kineto_trace_files(), ids=lambda p: str(p.relative_to(SHARED_TRACES)))
def test_every_shared_trace_loads_and_accounts_for_every_event(path: Path) -> None:
    tr = load_kineto(path)
    ps = tr.meta["parse_stats"]
    # Every event is kept, skipped (not modelled) or dropped (bad) — nothing vanishes.
    assert ps["events_read"] == ps["events_kept"] + sum(ps["skipped"].values()) + sum(ps["dropped"].values())
    assert ps["events_kept"] == sum(tr.table(t).height for t in ("kernels", "launches", "ops", "regions"))
    assert ps["events_read"] > 0 and not ps["truncated"]
    for t in ("kernels", "launches", "ops", "regions"):
        df = tr.table(t)
        assert df.filter(pl.col("end_ns") < pl.col("start_ns")).height == 0
        assert df["start_ns"].null_count() == 0
    # Nesting: a child lies within its parent (zero-length ops included).
    ops = tr.ops
    j = ops.join(
        ops.select("op_id", pl.col("start_ns").alias("ps"), pl.col("end_ns").alias("pe")),
        left_on="parent_id",
        right_on="op_id",
    )
    assert j.filter((pl.col("start_ns") < pl.col("ps")) | (pl.col("end_ns") > pl.col("pe"))).height == 0


def test_kernel_count_matches_plain_json() -> None:
    doc, tr = plain(DFI), loaded(DFI)
    evs = doc["traceEvents"]
    n_kernel = sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel")
    n_device = sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS)
    assert n_kernel == 19370  # README: 19k kernels
    assert tr.kernels.filter(kind="kernel").height == n_kernel
    assert tr.kernels.height == n_device
    n_ops = sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    assert tr.ops.height == n_ops
    assert tr.meta["distributed"]["rank"] == 1 and tr.meta["distributed"]["world_size"] == 2


def test_stream_busy_equals_independent_union() -> None:
    doc, tr = plain(DFI), loaded(DFI)
    per_stream: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            a = e["args"]
            s = int(e["ts"]) * 1000  # this trace has integer epoch µs
            per_stream.setdefault((a["device"], a["stream"]), []).append((s, s + int(e["dur"]) * 1000))
    got = {(r["device"], r["stream"]): r["busy_ns"] for r in stream_busy(tr.kernels, None).to_dicts()}
    want = {k: union_ns(v) for k, v in per_stream.items()}
    assert got == want
    assert len(want) == 2


@pytest.mark.parametrize(("rel", "cat"), [(DFI, "ac2g"), (CONTROL, "async_cpu_to_gpu")])
def test_launch_flows_new_and_old_category(rel: str, cat: str) -> None:
    doc, tr = plain(rel), loaded(rel)
    flows = [e for e in doc["traceEvents"] if e.get("cat") == cat and e.get("ph") in ("s", "f")]
    n_s = sum(1 for e in flows if e["ph"] == "s")
    n_f = sum(1 for e in flows if e["ph"] == "f")
    fl = tr.meta["flows"]
    assert fl["counts"] == {f"{cat}:f": n_f, f"{cat}:s": n_s}
    assert fl["launch_flow_categories"] == [cat]
    ids = {e["id"] for e in flows}
    corr = [
        e["args"].get("correlation") for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS
    ]
    linked = sum(1 for c in corr if c in ids)
    assert fl["device_activities_with_flow"] == linked
    # Every device activity of these traces is reached by a CPU→GPU flow.
    assert linked == len(corr) == tr.kernels.height


def test_every_kernel_correlation_has_a_launch() -> None:
    tr = loaded(CONTROL)
    missing = tr.kernels.join(tr.launches, on="correlation", how="anti")
    assert missing.height == 0


def test_fractional_ns_exact_on_ns_resolution_trace() -> None:
    raw = gzip.decompress((SHARED_TRACES / NS_RES).read_bytes()).decode()
    # Independent: the first kernel's ts/dur text, exact via Decimal.
    m = re.search(
        r'"cat": "kernel", "name": "([^"]*)", "pid": (\d+), "tid": (\d+),\s*"ts": ([0-9.]+), "dur": ([0-9.]+)', raw
    )
    assert m is not None
    start = int(Decimal(m.group(4)) * 1000)
    end = start + int(Decimal(m.group(5)) * 1000)
    assert start % 1000 != 0  # a genuine ns fraction of an epoch-µs value (float64 would lose it)
    tr = loaded(NS_RES)
    hit = tr.kernels.filter(pl.col("start_ns") == start)
    assert hit.height >= 1
    assert hit.filter(pl.col("name") == m.group(1))["end_ns"].to_list()[0] == end


def test_base_time_nanoseconds_added() -> None:
    doc, tr = plain(AMD), loaded(AMD)
    base = doc["baseTimeNanoseconds"]
    first = min(
        (e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"), key=lambda e: e["ts"]
    )
    assert tr.meta["time_base_ns"] == base and tr.meta["time_base"] == "baseTimeNanoseconds"
    got = tr.kernels.filter(kind="kernel")["start_ns"].min()
    assert got == base + int(Decimal(repr(first["ts"])) * 1000)
    assert tr.meta["devices"][0]["name"]


def test_chunked_nesting_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.tables.intervals import nest
    from tracekit.sources.kineto.reading import finish as kineto_finish

    monkeypatch.setattr(kineto_finish, "NEST_CHUNK_ROWS", 997)  # many chunks on ~40k ops
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", "1")  # the chunked polars path, not the C one
    tr = load_kineto(SHARED_TRACES / CONTROL)
    one = nest(tr.ops.select("pid", "tid", "op_id", "start_ns", "end_ns"), ["pid", "tid"], "op_id").sort("op_id")
    assert tr.ops.sort("op_id").select("depth", "parent_id").equals(one.select("depth", "parent_id"))
    assert tr.ops["depth"].max() >= 3
