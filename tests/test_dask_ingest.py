"""`tracekit ingest` on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on
localhost (no nanny, so a killed worker stays dead). The dataset must equal the serial ingest's,
table by table; a bad trace is reported with its reason while the others land; a worker killed
during the ingest leaves a complete, correct dataset. The kill test is last: it leaves one worker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from tracekit.tables.ids import make_trace_id
from tracekit.tables.trace import DATA_FILE, dataset_trace_ids
from cli_run import tk

distributed = pytest.importorskip("distributed")  # the `dask` extra; CI installs it (Makefile)

DASK = Path(sys.executable).parent / "dask"
TK = [sys.executable, "-m", "tracekit.cli.main"]  # this venv's tracekit
SMALL = [
    "kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto/hta/trace_filter/sampled_rank-0.json.gz",
    "kineto/hta/nccl_parser_config/nccl_data.json.gz",
]
BIG = "kineto/hta/df_index_resolver/df_index_resolver.json.gz"  # ~1 s of ingest per copy


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.file = root / "scheduler.json"
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        common = ["--no-dashboard"]
        self.scheduler = subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(self.file), *common],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        deadline = time.monotonic() + 60
        while not self.file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        for name in ("w0", "w1"):
            self.workers[name] = subprocess.Popen(
                [
                    str(DASK),
                    "worker",
                    "--scheduler-file",
                    str(self.file),
                    "--name",
                    name,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--memory-limit",
                    "2GB",
                    "--host",
                    "127.0.0.1",
                    "--local-directory",
                    str(root),
                    *common,
                ],
                cwd=root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        self.client = distributed.Client(scheduler_file=str(self.file), timeout="60s")
        self.client.wait_for_workers(2, timeout=90)
        self.address = self.client.scheduler.address

    def close(self) -> None:
        self.client.close()
        for p in [*self.workers.values(), self.scheduler]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [*self.workers.values(), self.scheduler]:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        yield c
    finally:
        c.close()


def copy_inputs(shared: Path, dest: Path, rels: list[str]) -> list[Path]:
    dest.mkdir()
    out = []
    for i, rel in enumerate(rels):
        f = dest / f"t{i}-{Path(rel).name}"
        shutil.copy(shared / rel, f)
        out.append(f)
    return out


def assert_same_dataset(a: Path, b: Path) -> None:
    """Same traces; every table partition (canonical, derived, meta) equal frame by frame."""
    assert dataset_trace_ids(a) == dataset_trace_ids(b)
    parts_a = sorted(p.relative_to(a) for p in a.glob(f"*/trace_id=*/{DATA_FILE}"))
    parts_b = sorted(p.relative_to(b) for p in b.glob(f"*/trace_id=*/{DATA_FILE}"))
    assert parts_a == parts_b and parts_a
    for rel in parts_a:
        fa, fb = pl.read_parquet(a / rel), pl.read_parquet(b / rel)
        if rel.parts[0] == "meta":  # the only per-run difference allowed: none (source paths are equal)
            fa, fb = fa.drop("meta_json"), fb.drop("meta_json")
        assert fa.equals(fb), rel
    assert not [p for p in a.iterdir() if p.name.startswith(".staging")]


def test_scheduler_ingest_equals_serial_and_reports_a_bad_trace(
    cluster: Cluster, shared_traces: Path, tmp_path: Path
) -> None:
    files = copy_inputs(shared_traces, tmp_path / "in", SMALL)
    (tmp_path / "in" / "zz-broken.json").write_text('{"traceEvents": [{"ph": "X", "ts": ')  # cut off
    serial, dask_ds = tmp_path / "serial", tmp_path / "dask"
    r1 = tk("ingest", str(tmp_path / "in"), "--out", str(serial), "--workers", "1")
    r2 = tk("ingest", str(tmp_path / "in"), "--out", str(dask_ds), "--scheduler", cluster.address)
    for r in (r1, r2):
        assert r.code == 3, r.err
        assert "ingested 3 of 4 traces" in r.out
        assert "Traceback" not in r.out + r.err
        # Reported at the end, with its reason, in one line.
        last = r.err.strip().splitlines()[-1]
        assert (
            last == "tracekit: error: 1 of 4 inputs failed: zz-broken.json (trace has no events (file is cut off))"
        ), last
    assert f"on a dask cluster at {cluster.address}" in r2.out
    assert dataset_trace_ids(dask_ds) == sorted(make_trace_id(f) for f in files)
    assert_same_dataset(dask_ds, serial)
    # Analysis across the traces, one task each on the cluster: the same document as serially.
    a1 = tk("analyze", str(dask_ds), "--format", "json", "--workers", "1")
    a2 = tk("analyze", str(dask_ds), "--format", "json", "--scheduler", cluster.address)
    assert a1.code == 0 and a2.code == 0, a2.err
    d1, d2 = json.loads(a1.out), json.loads(a2.out)
    assert d2.pop("ran_on") == f"dask cluster at {cluster.address}" and d1.pop("ran_on") == "serial, in this process"
    assert d1 == d2 and len(d1["traces"]) == 3 and not d1["failed"]


def test_progress_bar_across_tasks_on_a_tty(
    cluster: Cluster, shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracekit.cli import progress

    files = copy_inputs(shared_traces, tmp_path / "in", SMALL[:2])
    monkeypatch.setattr(progress, "enabled", lambda stream=None: True)  # as on a terminal
    r = tk("ingest", *map(str, files), "--out", str(tmp_path / "ds"), "--scheduler", cluster.address)
    assert r.code == 0, r.err
    # The bar is redrawn in place on stderr after each task: 0/2, then 1/2, then 2/2.
    frames = [f for f in r.err.split("\r\x1b[2K") if f.startswith("ingest [")]
    assert [f.split("] ")[1].split()[0] for f in frames][:1] == ["0/2"] and "2/2" in frames[-1]
    assert any(f.split("] ")[1].startswith("1/2") for f in frames)
    assert "\r" not in r.out  # the per-trace lines stay clean


def test_scheduler_from_the_environment(
    cluster: Cluster, shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracekit import parallel
    from tracekit.errors import UsageError

    files = copy_inputs(shared_traces, tmp_path / "in", SMALL[:1])
    monkeypatch.setenv(parallel.SCHEDULER_ENV, cluster.address)
    r = tk("ingest", str(files[0]), "--out", str(tmp_path / "ds"))
    assert r.code == 0 and f"on a dask cluster at {cluster.address}" in r.out, r.err
    assert dataset_trace_ids(tmp_path / "ds") == [make_trace_id(files[0])]
    # The rules of parallel.plan: the variable names the cluster; --workers 1 still means serial;
    # --workers with --scheduler is refused in one line.
    assert parallel.plan(3) == parallel.Plan("cluster", 0, cluster.address)
    assert parallel.plan(3, workers=1).mode == "serial"
    with pytest.raises(UsageError, match="--workers sizes a local cluster"):
        parallel.plan(3, workers=2, scheduler=cluster.address)
    monkeypatch.delenv(parallel.SCHEDULER_ENV)
    assert parallel.plan(3, workers=2) == parallel.Plan("local", 2) and parallel.plan(1, workers=2).mode == "serial"


def test_workers_without_dask_say_how_to_install(
    tmp_path: Path, shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracekit import parallel

    files = copy_inputs(shared_traces, tmp_path / "in", SMALL[:2])
    monkeypatch.setattr(parallel, "have_dask", lambda: False)
    monkeypatch.delenv(parallel.SCHEDULER_ENV, raising=False)
    assert tk("ingest", *files, "--out", tmp_path / "ds", "--workers", "2").code != 0
    assert not (tmp_path / "ds").exists()  # refused before any work
    assert parallel.plan(2).mode == "serial"  # default without Dask: serial
    with pytest.raises(Exception, match=r"pip install 'tracekit\[dask\]'"):
        parallel.plan(2, workers=2)


@pytest.mark.slow  # > 10 s on this 2-core machine
def test_killed_worker_mid_ingest_leaves_a_complete_dataset(
    cluster: Cluster, shared_traces: Path, tmp_path: Path
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    files = []
    for i in range(4):  # 4 tasks of ~1 s on 2 workers: both are busy when one is killed
        files.append(src / f"rank{i}.json.gz")
        shutil.copy(shared_traces / BIG, files[-1])
    ref = tmp_path / "ref"
    assert tk("ingest", str(files[0]), "--out", str(ref), "--workers", "1").code == 0
    out = tmp_path / "ds"
    proc = subprocess.Popen(
        [*TK, "ingest", str(src), "--out", str(out), "--scheduler", cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CI": "1"},
    )
    victim = cluster.workers["w0"]
    addr = next(a for a, w in cluster.client.scheduler_info()["workers"].items() if w["name"] == "w0")
    deadline = time.monotonic() + 120
    while not cluster.client.processing(workers=[addr]).get(addr) and time.monotonic() < deadline:
        time.sleep(0.05)
    busy = cluster.client.processing(workers=[addr]).get(addr)
    assert busy, "the victim never got a task"
    time.sleep(0.3)  # into the task (loading the trace)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "ingested 4 of 4 traces" in stdout
    assert len(cluster.client.scheduler_info()["workers"]) == 1  # really gone; w1 did the rest
    ids = dataset_trace_ids(out)
    assert ids == sorted(make_trace_id(f) for f in files)
    assert not [p for p in out.iterdir() if p.name.startswith(".staging")]
    # Every trace is the same file under another name: each partition equals the serial one.
    rid = dataset_trace_ids(ref)[0]
    tables = sorted(d.name for d in ref.iterdir() if d.is_dir() and d.name != "meta")
    assert {"kernels", "launches", "ops", "regions", "attribution_activities"} <= set(tables)
    for table in tables:
        want = pl.read_parquet(ref / table / f"trace_id={rid}" / DATA_FILE)
        for tid in ids:
            assert pl.read_parquet(out / table / f"trace_id={tid}" / DATA_FILE).equals(want), (table, tid)
