"""A dataset's own files (issue 28): read back only when they are as tracekit writes them.
Before: ``schema_version`` was never checked (99 read as current); renamed, dropped or nulled
columns became nulls and ``summary``/``report`` died with a TypeError; ``meta_json`` with
``devices: "x"`` was an AttributeError; derived tables whose key survived but whose columns did
not were a ColumnNotFoundError; a stored result cut short (its check line intact) was printed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from tracekit.tables.layout import dataset_trace_ids

from kineto_events import kernel
from cli_run import tk


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset of one hand-made trace: 2 kernels launched by 2 aten::mm under one region."""
    tmp = tmp_path_factory.mktemp("ds")
    events = []
    for i in range(2):
        events.append(kernel(i))
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 95 + 10 * i, "dur": 2, "args": {"correlation": i}})  # fmt: skip
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 94 + 10 * i, "dur": 4})
    events.append(
        {"ph": "X", "cat": "user_annotation", "name": "tk:decode step=1", "pid": 1, "tid": 1, "ts": 90, "dur": 30}
    )
    trace = tmp / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert tk("ingest", str(trace), "--out", str(tmp / "ds"))[0] == 0
    return tmp / "ds"


def _copy(dataset: Path, tmp_path: Path) -> tuple[Path, str]:
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(dataset, ds)
    return ds, dataset_trace_ids(ds)[0]


def _edit(ds: Path, table: str, tid: str, fn: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    f = ds / table / f"trace_id={tid}" / "data.parquet"
    fn(pl.read_parquet(f)).write_parquet(f)


def _meta(fn: Callable[[dict[str, object]], object]) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(pl.lit(json.dumps(fn(json.loads(df["meta_json"][0])))).alias("meta_json"))

    return edit


CASES: dict[str, tuple[str, Callable[[pl.DataFrame], pl.DataFrame], str]] = {
    "schema_version 99": (
        "meta",
        lambda d: _meta(lambda m: {**m, "schema_version": 99})(d.with_columns(pl.lit(99).alias("schema_version"))),
        "the meta of trace {tid!r}: schema_version 99 (written by a newer tracekit; this one reads 1); "
        "re-ingest the trace",
    ),
    "devices x": (
        "meta",
        _meta(lambda m: {**m, "devices": "x"}),
        "the meta of trace {tid!r}: 'devices' is a str, not a list",
    ),
    "meta a list": (
        "meta",
        _meta(lambda m: [1, 2]),
        "the meta of trace {tid!r} is not a JSON object; re-ingest the trace",
    ),
    "renamed kernels": (
        "kernels",
        lambda d: d.rename({"start_ns": "begin", "end_ns": "finish"}),
        "table 'kernels' of trace {tid!r} is not as tracekit writes it: columns start_ns, end_ns missing, "
        "unknown columns begin, finish; re-ingest the trace",
    ),
    "dropped column": (
        "ops",
        lambda d: d.drop("op_id"),
        "table 'ops' of trace {tid!r} is not as tracekit writes it: column op_id missing; re-ingest the trace",
    ),
    "nulled column": (
        "regions",
        lambda d: d.with_columns(pl.lit(None, dtype=pl.Int64()).alias("start_ns")),
        "table 'regions' of trace {tid!r} has nulls in start_ns (1 rows), never null as written; re-ingest the trace",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("cmd", [["analyze", "--no-reuse"], ["summary"], ["report", "--format", "md", "--no-plots"]])
def test_tampered_dataset_is_one_line(dataset: Path, tmp_path: Path, case: str, cmd: list[str]) -> None:
    ds, tid = _copy(dataset, tmp_path)
    table, fn, want = CASES[case]
    _edit(ds, table, tid, fn)
    rc, out, err = tk(cmd[0], str(ds), *cmd[1:])
    assert rc == 4 and "Traceback" not in out + err  # DatasetError's exit code
    assert err.strip().splitlines() == [f"tracekit: error: {ds}: " + want.format(tid=tid)]


@pytest.mark.parametrize("table", ["attribution_activities", "attribution_links", "region_labels", "op_costs"])
@pytest.mark.parametrize("how", ["renamed", "nulled"])
def test_tampered_derived_table_is_recomputed(dataset: Path, tmp_path: Path, table: str, how: str) -> None:
    """The derived tables are a cache: one whose columns changed since its key was written (renamed)
    or whose ids were nulled is not read; the analysis recomputes it and prints what the untouched
    dataset gives."""
    want = tk("analyze", str(dataset), "--format", "json", "--no-reuse")[1]
    ds, tid = _copy(dataset, tmp_path)
    if how == "renamed":
        _edit(ds, table, tid, lambda d: d.rename({c: c + "_x" for c in d.columns}))
    else:
        _edit(ds, table, tid, lambda d: d.with_columns(pl.lit(None).cast(d.schema[c]).alias(c) for c in d.columns))
    rc, out, err = tk("analyze", str(ds), "--format", "json", "--no-reuse")
    assert rc == 0, err
    assert json.loads(out)["regions"] == json.loads(want)["regions"]


def test_stored_result_cut_short_is_recomputed(dataset: Path, tmp_path: Path) -> None:
    """A stored result whose document lost its second half (check line intact) is not printed:
    the analysis runs again and prints the whole document (before: the half, exit 0)."""
    ds, _ = _copy(dataset, tmp_path)
    rc, first, _ = tk("analyze", str(ds), "--format", "json")
    assert rc == 0
    [entry] = list((ds / "analysis_results").glob("*/*.json"))
    head, _, rest = entry.read_bytes().partition(b"\n")
    assert rest.startswith(first.encode())  # the stored document is what was printed
    for fmt in ("json", "table"):
        entry.write_bytes(head + b"\n" + rest[: len(rest) // 2])
        rc, out, err = tk("analyze", str(ds), "--format", fmt)
        assert rc == 0 and "Traceback" not in err
        if fmt == "json":
            assert out == first
