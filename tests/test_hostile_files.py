"""Files (issue 13): the atomic writer, sidecars, staging directories and output errors."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracekit.conventions import read_sidecar
from tracekit.errors import DatasetError
from tracekit.report.sections.environment import environment
from tracekit.report.output import write_atomic
from tracekit.tables import staging

from kineto_events import KERNEL  # noqa: E402
from cli_run import tk_process


def _trace(tmp_path: Path, name: str = "run.pt.trace.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": [KERNEL]}))
    return p


def test_atomic_writer_ignores_planted_symlinks(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "report.md"
    # The old temp names were predictable (".report.md.tmp-<pid>"): plant one for every pid near ours.
    for pid in range(max(1, os.getpid() - 50), os.getpid() + 50):
        (tmp_path / f".report.md.tmp-{pid}").symlink_to(victim)
    write_atomic(out, "report")
    assert victim.read_text() == "keep me"
    assert out.read_text() == "report" and not out.is_symlink()
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_atomic_writer_replaces_a_symlink_at_the_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "r.md"
    out.symlink_to(victim)
    write_atomic(out, "new")
    assert victim.read_text() == "keep me" and out.read_text() == "new" and not out.is_symlink()


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def test_symlinked_sidecar_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"dsn": "postgres://u:hunter2@db/x", "config": {"note": "from the secret"}}))
    trace = _trace(tmp_path)
    (tmp_path / "run.tracekit.json").symlink_to(secret)
    assert read_sidecar(trace) is None
    rows = environment({}, None, trace)["rows"]
    assert not any("secret" in str(v) or "hunter2" in str(v) for _, v in rows)


def test_fifo_sidecar_does_not_hang(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    os.mkfifo(tmp_path / "run.tracekit.json")
    t0 = time.monotonic()
    assert read_sidecar(trace) is None
    assert time.monotonic() - t0 < 5


def test_passwords_in_sidecar_values_are_redacted(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    (tmp_path / "run.tracekit.json").write_text(
        json.dumps(
            {
                "config": {
                    "database_url": "postgresql://admin:hunter2@db.internal/prod",
                    "conn": "host=db password=hunter2 port=5",
                }
            }
        )
    )
    rows = dict(environment({}, None, trace)["rows"])
    assert rows["runner config.database_url"] == "postgresql://***@db.internal/prod"
    assert rows["runner config.conn"] == "host=db password=*** port=5"
    proc = tk_process("report", str(trace), "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert "hunter2" not in proc.stdout


def test_stale_staging_is_swept_and_live_one_kept(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    out.mkdir()
    dead = out / ".staging-old-000000"  # an interrupted ingest: its lock file is held by nobody
    dead.mkdir()
    (dead / staging.LOCK_FILE).write_bytes(b"")
    (dead / "kernels").mkdir()
    old = out / ".staging-older-111111"  # from before locks: no lock file, a day old
    old.mkdir()
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    # A live writer in another process holds its lock.
    code = (
        "import sys, time; from tracekit.tables.staging import open_staging; "
        "o, s = open_staging(sys.argv[1], 'live'); print(s, flush=True); time.sleep(60)"
    )
    live = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None
        live_dir = Path(live.stdout.readline().strip())
        assert live_dir.is_dir() and not dead.exists()  # the live writer swept the dead one
        proc = tk_process("ingest", str(_trace(tmp_path, "t.json")), "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert live_dir.is_dir() and not old.exists()
        assert [p.name for p in out.iterdir() if p.name.startswith(".staging-")] == [live_dir.name]
    finally:
        live.kill()
        live.wait()


def test_read_only_output_is_one_line(tmp_path: Path) -> None:
    proc = tk_process("ingest", str(_trace(tmp_path)), "--out", "/proc/tracekit-cannot-write-here")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr + proc.stdout
    assert "cannot write the dataset" in proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_full_disk_is_one_line_and_cleans_up(tmp_path: Path, stream: str) -> None:
    """A file-size limit stands in for a full disk: every write past 2 KB fails with EFBIG."""
    trace = tmp_path / "t.json"
    trace.write_text(
        json.dumps(
            {
                "traceEvents": [
                    dict(KERNEL, ts=100 + i, args={**KERNEL["args"], "correlation": i})  # type: ignore[dict-item]
                    for i in range(200)
                ]
            }
        )
    )
    out = tmp_path / "ds"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = tk_process("ingest", str(trace), "--out", str(out), stream, preexec_fn=limit)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"{out}: cannot write the dataset" in proc.stdout
    assert not [p for p in out.iterdir() if p.name.startswith(".staging-")]  # cleaned up, no second error


def test_output_error_is_not_blamed_on_the_input(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    out.write_text("a file, not a directory")
    with pytest.raises(DatasetError, match="not a directory"):
        staging.open_staging(out, "x")
