"""`tracekit ingest --workers 2` on a LocalCluster started by tracekit (tracekit/parallel.py): from a
fresh single-threaded process its workers are forked (no second import of dask.distributed), and
the dataset equals the serial ingest's; a process whose polars thread pool has run spawns them
instead (forking it would deadlock the child)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")  # the `dask` extra; CI installs it (Makefile)

from test_dask_ingest import SMALL, assert_same_dataset, copy_inputs  # noqa: E402
from cli_run import tk_process  # noqa: E402


def _py(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**base, **env})
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_start_method_rule() -> None:
    rule = "from tracekit.parallel import start_method; print(start_method())"
    assert _py(rule) == "fork"  # a fresh interpreter: one thread
    used = "import polars as pl; pl.DataFrame({'a': range(10**5)}).group_by(pl.col('a') % 7).agg(pl.len())\n"
    assert _py(used + rule) == "spawn"  # polars' pool threads exist now
    assert _py(rule, DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD="forkserver") == "forkserver"


def test_local_cluster_ingest_equals_serial(shared_traces: Path, tmp_path: Path) -> None:
    copy_inputs(shared_traces, tmp_path / "in", SMALL)
    tk = [sys.executable, "-m", "tracekit.cli.main", "ingest", str(tmp_path / "in")]
    env = {k: v for k, v in os.environ.items() if k != "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"}
    serial = subprocess.run([*tk, "--out", str(tmp_path / "s"), "--workers", "1"], capture_output=True, text=True)
    local = subprocess.run(
        [*tk, "--out", str(tmp_path / "d"), "--workers", "2"], capture_output=True, text=True, timeout=300, env=env
    )
    assert serial.returncode == 0 and local.returncode == 0, local.stderr
    assert "dask LocalCluster, 2 workers" in local.stdout and "ingested 3 of 3 traces" in local.stdout
    # Two worker processes (pids) ran the three tasks, neither of them this command's process.
    assert "2 worker processes ran the tasks" in local.stdout, local.stdout
    assert_same_dataset(tmp_path / "d", tmp_path / "s")


def test_no_dask_warning_when_its_default_port_is_taken(tmp_path: Path) -> None:
    """Dask's scheduler serves HTTP on 8787 unless told otherwise, and warns on stderr ("Port 8787
    is already in use") when something else holds it: tracekit's output must carry no such line
    (issue 25). The port is held here by a listening socket for the whole ingest."""
    import socket

    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
    except OSError:
        pass  # held by someone else already: the condition under test holds anyway
    else:
        holder.listen(1)
    try:
        src = Path(__file__).resolve().parent.parent / "sample_traces" / "llm" / "llm.pt.trace.json.gz"
        p = tk_process("ingest", src, "--out", tmp_path / "ds", "--workers", "2")
    finally:
        holder.close()
    assert p.returncode == 0, p.stderr
    assert "already in use" not in p.stderr and "Warning" not in p.stderr, p.stderr
    assert "ingested 1 of 1 trace" in p.stderr + p.stdout
