"""Start-up hygiene: which heavy third-party modules a command imports (issue 14).

Each command runs in a fresh interpreter (``tracekit.cli.main.main`` with stdout captured) that
then lists which of the heavy modules ended up in ``sys.modules``. Only those third-party modules
are pinned, so other modules of tracekit may come and go freely:

- ``tracekit --help`` imports none of them (not even polars: the command list comes from the
  COMMANDS table, no command module is imported);
- ``summary`` and ``analyze --format json`` of a Kineto JSON trace or of a dataset import polars
  but never pyarrow (the native scanner hands its buffers to polars through the Arrow C data
  interface; gzip is inflated by zlib), numpy, pandas, matplotlib, torch or dask.

Costs ≈ 5 s (one interpreter per case).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_TRACES
from cli_run import tk_process

HEAVY = ("polars", "pyarrow", "numpy", "pandas", "matplotlib", "torch", "dask")
SMALL = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"

CHILD = """
import contextlib, io, json, sys
from tracekit.cli.main import main
buf = io.BytesIO()
out = io.TextIOWrapper(buf, encoding="utf-8")
with contextlib.redirect_stdout(out):
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        if exc.code:
            raise
out.flush()
heavy = %r
print(json.dumps({"imported": sorted(m for m in heavy if m in sys.modules), "out": len(buf.getvalue())}))
""" % (HEAVY,)


def imported(*args: str) -> list[str]:
    """Heavy modules in ``sys.modules`` after ``tracekit ARGS`` ran in a fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["out"] > 0 or "-o" in args  # the command did print its output
    result: list[str] = doc["imported"]
    return result


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("startup") / "ds"
    r = tk_process("ingest", str(SMALL), "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_help_imports_nothing_heavy() -> None:
    assert imported("--help") == []


def test_command_help_imports_nothing_heavy() -> None:
    # The subcommand's own module is imported (for its options), but it imports polars lazily.
    assert imported("analyze", "--help") == []
    assert imported("ingest", "--help") == []


@pytest.mark.parametrize(
    "command", [["summary"], ["analyze", "--format", "json", "--no-reuse"]], ids=["summary", "analyze-json"]
)
def test_trace_commands_import_polars_only(command: list[str], dataset: Path) -> None:
    assert imported(*command[:1], str(SMALL), *command[1:]) == ["polars"]
    assert imported(*command[:1], str(dataset), *command[1:]) == ["polars"]


def test_one_file_ingest_imports_polars_only(tmp_path: Path) -> None:
    # With dask installed, a one-file ingest is serial: it must not import dask.distributed
    # (≈ 0.9 s) to find that out (parallel.have_dask finds the package without importing it).
    assert imported("ingest", str(SMALL), "--out", str(tmp_path / "ds")) == ["polars"]


def test_reanalysis_of_a_dataset_reads_the_stored_result(tmp_path: Path) -> None:
    """The first analysis of a dataset computes (polars) and stores its result; the second, same
    options, unchanged trace, reads it (nothing heavy imported) and prints the same bytes; other
    options compute again; re-ingesting the trace removes the stored results."""
    ds = tmp_path / "ds"
    r = tk_process("ingest", str(SMALL), "--out", str(ds))
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert imported("analyze", str(ds), "--format", "json", "-o", str(first)) == ["polars"]
    assert len(list((ds / "analysis_results").rglob("*.json"))) == 1
    assert imported("analyze", str(ds), "--format", "json", "-o", str(second)) == []
    assert first.read_bytes() == second.read_bytes()
    assert json.loads(first.read_bytes())["totals"]["conserved"] is True
    assert imported(
        "analyze", str(ds), "--format", "json", "--thresholds", "busy=0.9", "-o", str(second), "--force"
    ) == ["polars"]
    assert len(list((ds / "analysis_results").rglob("*.json"))) == 2
    # table format from the stored document: its renderer (report/screens/analyze.py → report/sections/build.py)
    # imports polars today, nothing heavier
    assert imported("analyze", str(ds)) in ([], ["polars"])
    r = tk_process("ingest", str(SMALL), "--out", str(ds), "--force")
    assert r.returncode == 0, r.stderr[-2000:]
    assert not list((ds / "analysis_results").rglob("*.json"))
    assert imported("analyze", str(ds), "--format", "json", "-o", str(second), "--force") == ["polars"]


def test_nsys_ingest_does_not_import_pandas(tmp_path: Path) -> None:
    # The chunked Nsight writer writes the (here empty) ops table as an empty Arrow table; pyarrow's
    # Table.from_pylist and Schema.empty_table import pandas to build one (≈ 0.7 s of a command).
    nsys = SHARED_TRACES / "nsys/fuser/report1_64ee035d.sqlite"
    assert "pandas" not in imported("ingest", str(nsys), "--out", str(tmp_path / "ds"))


def test_stored_results_key_follows_every_code_file(tmp_path: Path) -> None:
    # A stored result is keyed by the code's identity: path, size and mtime (ns) of every .py file
    # of the package (tables/results.py _code_hash; stats only, no file read). A copy of the
    # package: each edit below must change the identity; bytecode caches must not.
    import os
    import shutil

    import tracekit.tables.results as results

    pkg = tmp_path / "tracekit"
    shutil.copytree(Path(results.__file__).resolve().parents[1], pkg, ignore=shutil.ignore_patterns("*.so"))
    base = results._code_hash(pkg)
    assert results._code_hash(pkg) == base  # the same files: the same key
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "README.txt").write_text("not code")
    assert results._code_hash(pkg) == base  # bytecode and non-.py files are not code
    f = pkg / "analysis" / "verdict.py"
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched: 1 ns later
    touched = results._code_hash(pkg)
    assert touched != base
    f.write_bytes(f.read_bytes() + b"\n")  # one byte more
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # at the old time: the size tells
    assert results._code_hash(pkg) not in (base, touched)
    f.write_bytes(f.read_bytes()[:-1])
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert results._code_hash(pkg) == base  # back as it was
    (pkg / "labels" / "new_rule.py").write_text("X = 1\n")  # a new module
    assert results._code_hash(pkg) != base
    assert results._code_hash() != base  # another place: another install


FAST_CHILD = """
import json, sys
from tracekit.cli.fast import stored_document
doc = stored_document(sys.argv[1:])
loaded = sorted(m for m in ("click", "polars", "msgspec") if m in sys.modules)
print(json.dumps({"len": None if doc is None else len(doc), "loaded": loaded}))
"""


def test_console_script_prints_a_stored_result_before_click(tmp_path: Path) -> None:
    """The console script (tracekit.cli.fast:main) prints a stored result of `analyze DS --format
    json` without importing click or polars: the same bytes as the click command. Any other
    spelling, other options, or no stored result: it defers to the click command."""
    ds = tmp_path / "ds"
    r = tk_process("ingest", str(SMALL), "--out", str(ds))
    assert r.returncode == 0, r.stderr[-2000:]

    def fast(*args: str) -> dict[str, object]:
        p = subprocess.run([sys.executable, "-c", FAST_CHILD, *args], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        out: dict[str, object] = json.loads(p.stdout)
        return out

    assert fast("analyze", str(ds), "--format", "json")["len"] is None  # nothing stored yet
    first = subprocess.run(
        [sys.executable, "-m", "tracekit.cli.main", "analyze", str(ds), "--format", "json"], capture_output=True
    )
    assert first.returncode == 0 and first.stdout.startswith(b"{")
    for argv in (("analyze", str(ds), "--format", "json"), ("analyze", "--format=json", str(ds))):
        got = fast(*argv)
        assert got == {"len": len(first.stdout), "loaded": []}, argv  # neither click nor polars nor msgspec
    script = "import sys; sys.argv[0] = 'tracekit'; from tracekit.cli.fast import main; main()"
    hit = subprocess.run([sys.executable, "-c", script, "analyze", str(ds), "--format", "json"], capture_output=True)
    assert hit.returncode == 0 and hit.stdout == first.stdout and hit.stderr == b""
    # not the plain spelling: the click command decides (the same stored bytes for --regions, which
    # JSON ignores; computed again for other thresholds)
    for argv in (
        ("analyze", str(ds)),  # table format
        ("analyze", str(ds), "--format", "json", "--regions", "3"),
        ("analyze", str(ds), "--format", "json", "--thresholds", "busy=0.9"),
        ("analyze", str(ds), "--format", "md"),
        ("analyze", str(tmp_path / "missing"), "--format", "json"),
        ("analyze", str(SMALL), "--format", "json"),  # a trace file, not a dataset
        ("summary", str(ds), "--format", "json"),
    ):
        assert fast(*argv)["len"] is None, argv
    limit = subprocess.run(
        [sys.executable, "-c", script, "analyze", str(ds), "--format", "json", "--regions", "3"], capture_output=True
    )
    assert limit.returncode == 0 and limit.stdout == first.stdout
    missing = subprocess.run(
        [sys.executable, "-c", script, "analyze", str(tmp_path / "nope"), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr  # click's own one-line error
