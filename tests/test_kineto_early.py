"""The early read (tracekit/sources/kineto/reading/early.py): a Kineto file read while polars loads, its
record replayed into the tables. In this process polars is already loaded, so `load` reads the
ordinary way; the early path is called directly here, and taken for real in fresh interpreters
(subprocesses), where it must give the same dataset and the same errors."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from typing import Any
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from conftest import kineto_trace_files
from tracekit.commands.analyze import ANALYSIS_MODULES
from tracekit.errors import TracekitError
from tracekit.ingest import ingest_file
from tracekit.sources import load
from tracekit.tuning import importer
from tracekit.sources.kineto.reading.early import LIMIT_BYTES, read_while, worth_it
from tracekit.sources.kineto.loader import load_kineto
from tracekit.tables.schema import TABLES

DFI = "kineto/hta/df_index_resolver/df_index_resolver.json.gz"


@pytest.mark.parametrize("path", kineto_trace_files(), ids=lambda p: p.parent.name + "/" + p.name)
def test_early_read_equals_the_ordinary_read_on_every_shared_trace(path: Path) -> None:
    ordinary = load_kineto(path, trace_id="t")
    early = read_while(path, importer(()))
    assert early.log, "nothing recorded"
    replayed = load_kineto(path, trace_id="t", early=early)
    for t in TABLES:
        assert_frame_equal(ordinary.table(t), replayed.table(t))
    assert ordinary.meta == replayed.meta
    assert early.log == []  # the record is consumed by the replay (its buffers freed as it goes)


def test_worth_it_only_for_files_within_the_limit(tmp_path: Path, shared_traces: Path) -> None:
    assert worth_it(shared_traces / DFI)
    assert not worth_it(tmp_path)  # a directory: the ordinary read says why
    assert not worth_it(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: LIMIT_BYTES + 1 bytes on disk, none written
        fh.truncate(LIMIT_BYTES + 1)
    assert not worth_it(big)
    # A gzip file is judged by its JSON size (the ISIZE trailer), not by its size on disk: 3 MB
    # of gzip whose trailer says 300 MiB (allowed: under 100× the compressed size).
    gz = tmp_path / "big.json.gz"
    body = gzip.compress(os.urandom(3 << 20), compresslevel=1)
    gz.write_bytes(body[:-4] + (300 << 20).to_bytes(4, "little"))
    assert gz.stat().st_size < LIMIT_BYTES and not worth_it(gz)
    gz.write_bytes(body)  # the true trailer: 3 MiB of content
    assert worth_it(gz)


def _fresh(code: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter (polars not loaded yet); its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=True,
    )
    return out.stdout


_SPY = """
import json, sys
import tracekit.sources.kineto.reading.early as e
from tracekit.sources import load
from tracekit.tuning import importer
calls = []
real = e.read_while
def spy(path, prepare):
    calls.append(["polars" in sys.modules, list(prepare.modules)])
    return real(path, prepare)
e.read_while = spy
try:
    t = load(sys.argv[1] if len(sys.argv) > 1 else {path!r}, warm=importer(("tracekit.analysis.store.derived",)))
    print(json.dumps({{"calls": calls, "kernels": t.table("kernels").height, "ops": t.table("ops").height}}))
except Exception as exc:
    print(json.dumps({{"calls": calls, "error": type(exc).__name__ + ": " + str(exc)}}))
"""


def test_a_fresh_process_reads_early_while_polars_and_the_warm_modules_load(shared_traces: Path) -> None:
    path = str(shared_traces / DFI)
    got = json.loads(_fresh(_SPY.format(path=path)))
    # One early read, started before polars was loaded, importing the loader and the warm module.
    assert got["calls"] == [[False, ["tracekit.sources.kineto.loader", "tracekit.analysis.store.derived"]]]
    # df_index_resolver: 22,290 device activities and 56,680 ops (the ingest line of BENCHMARKS.md).
    assert (got["kernels"], got["ops"]) == (22290, 56680)
    off = json.loads(_fresh(_SPY.format(path=path), {"TRACEKIT_NO_EARLY_READ": "1"}))
    assert off["calls"] == [] and (off["kernels"], off["ops"]) == (22290, 56680)


def test_ingest_in_a_fresh_process_writes_what_the_ordinary_read_writes(tmp_path: Path, shared_traces: Path) -> None:
    src = shared_traces / DFI
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from tracekit.cli.main import main; main()",
            "ingest",
            str(src),
            "--out",
            str(tmp_path / "early"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TRACEKIT_NO_EARLY_READ"},
    )
    ingest_file(src, tmp_path / "ordinary")  # polars is loaded here: the ordinary read
    names = sorted(p.name for p in (tmp_path / "ordinary").iterdir() if not p.name.startswith("."))
    assert names == sorted(p.name for p in (tmp_path / "early").iterdir() if not p.name.startswith("."))
    for name in names:
        a = pl.read_parquet(tmp_path / "ordinary" / name / "**/*.parquet")
        b = pl.read_parquet(tmp_path / "early" / name / "**/*.parquet")
        assert_frame_equal(a, b)


def _bad_inputs(tmp_path: Path) -> list[Path]:
    out = []
    for name, data in [
        ("empty.json", b""),
        ("text.json", b"hello, not json"),
        ("no_events.json", b'{"schemaVersion": 1}'),
        ("cut.json", b'{"traceEvents": [{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"du'),
        ("sqlite.json", b"SQLite format 3\x00" + b"\x00" * 100),
        ("report.nsys-rep", b"\x00" * 64),
        ("gz_cut.json.gz", gzip.compress(b'{"traceEvents": [' + b" " * 5000)[:40]),
    ]:
        p = tmp_path / name
        p.write_bytes(data)
        out.append(p)
    return out


def test_bad_input_fails_the_same_way_on_the_early_read(tmp_path: Path) -> None:
    for p in _bad_inputs(tmp_path):
        try:
            t = load(p)  # ordinary read (polars is loaded here)
            want = {"kernels": t.table("kernels").height, "ops": t.table("ops").height}
        except TracekitError as exc:
            want = {"error": type(exc).__name__ + ": " + str(exc)}
        got = json.loads(_fresh(_SPY.format(path=str(p))))
        calls = got.pop("calls")
        assert got == want, p.name
        # The early path is taken for the files that start like JSON (sniffed as Kineto); the
        # empty file, the text, the SQLite header and the report are refused by the sniffer first.
        assert len(calls) == (1 if p.name in ("no_events.json", "cut.json", "gz_cut.json.gz") else 0), p.name


_CLI_SPY = """
import sys
import tracekit.sources.kineto.reading.early as e
calls = []
real = e.read_while
def spy(path, prepare):
    calls.append(list(prepare.modules))
    return real(path, prepare)
e.read_while = spy
from tracekit.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
sys.stderr.write("EARLY " + repr(calls) + "\\n")
"""


@pytest.mark.parametrize(
    ("args", "warm"),
    [
        (["analyze", "{p}", "--format", "json"], [*ANALYSIS_MODULES, "tracekit.commands.analyze_compute"]),
        (
            ["summary", "{p}", "--format", "json"],
            ["tracekit.analysis.trace_summary", "tracekit.report.screens.summary"],
        ),
    ],
    ids=["analyze", "summary"],
)
def test_analyze_and_summary_of_a_file_read_early_and_print_the_same(
    args: list[str], warm: list[str], shared_traces: Path
) -> None:
    path = str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz")
    argv = [a.format(p=path) for a in args]
    outs = {}
    for off in ("0", "1"):
        env = {**os.environ, "TRACEKIT_NO_EARLY_READ": off}
        r = subprocess.run(
            [sys.executable, "-c", _CLI_SPY, *argv], capture_output=True, text=True, timeout=300, env=env, check=True
        )
        outs[off] = r.stdout
        want = [] if off == "1" else [["tracekit.sources.kineto.loader", *warm]]
        assert f"EARLY {want!r}" in r.stderr
    assert outs["0"] == outs["1"]
    assert json.loads(outs["0"])  # a whole JSON document


def test_analyze_of_a_file_releases_the_trace_before_encoding(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace read early (commands/analyze.py `_early_file`) is released before the document is
    built, as a trace loaded the other way is: no Trace is alive when the result is encoded."""
    import gc

    from cli_run import tk_out
    from tracekit.analysis.result import AnalysisResult
    from tracekit.tables.trace import Trace

    real = AnalysisResult.to_json_parts  # the printed JSON (commands/analyze_compute.py: nothing stored)
    alive: list[int] = []

    def traces() -> set[int]:  # Trace objects alive now (type(), not isinstance: no proxy lookups)
        gc.collect()
        return {id(o) for o in gc.get_objects() if type(o) is Trace}

    before = traces()  # other tests' traces (session fixtures, caches) are not this command's

    def spy(self: AnalysisResult) -> Any:
        alive.append(len(traces() - before))
        return real(self)

    monkeypatch.setattr(AnalysisResult, "to_json_parts", spy)
    out = tk_out("analyze", shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz", "--format", "json")
    assert json.loads(out)["trace"]["id"]
    assert alive == [0]


_AFTER_LOAD = """
import contextlib, io, json, shutil, sys, tempfile
from tracekit.commands.analyze import ANALYSIS_MODULES
from tracekit.ingest import DERIVED_MODULES
from tracekit.sources import load
for m in (*ANALYSIS_MODULES, *DERIVED_MODULES, "tracekit.report.formats.json_print"):
    __import__(m)
t = load({path!r}, warm=())
before = set(sys.modules)
from tracekit.analysis import analyze
from tracekit.analysis.store.derived import write_with_derived
from tracekit.report.formats.json_print import document
with contextlib.redirect_stdout(io.StringIO()):
    for piece in document(analyze(t).to_json_bytes()):
        pass
out = tempfile.mkdtemp()
write_with_derived(t, out)
shutil.rmtree(out)
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("tracekit"))))
"""


def test_the_warm_modules_are_all_that_analysis_and_ingest_import_after_the_load(shared_traces: Path) -> None:
    """`analyze FILE` and `ingest` name the modules their work imports after the load
    (commands/analyze.py ANALYSIS_MODULES, ingest.py DERIVED_MODULES), so that the early read imports
    them in its thread while the file is read. With those imported first, analysing
    nccl_data (JSON document) and writing its derived tables import no other tracekit module."""
    path = str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz")
    assert json.loads(_fresh(_AFTER_LOAD.format(path=path))) == []
