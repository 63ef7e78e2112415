"""The rows that benchmarks/commands.py times: its inputs (two shared Kineto traces, optionally a
big replica and an Nsight export), the anchor programs (``json.load``, HTA's ``TraceAnalysis``,
``pandas.read_sql``), the ``Row`` record (a name, an argv, its group, whether it is the group's
anchor, and what the runner measures) and ``make_rows``: the rows in table order, after ingesting
the datasets they read (``--before`` twins, ``--big``, ``--nsys`` and ``--only`` applied)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TRACEKIT_SHARED_TRACES", REPO.parent / "shared/traces"))
DFI = SHARED / "kineto/hta/df_index_resolver/df_index_resolver.json.gz"
SMALL = SHARED / "kineto/hta/nccl_parser_config/nccl_data.json.gz"  # 0.75 MB on disk, 10 MB JSON

JSON_LOAD = (
    "import gzip, json, sys; raw = open(sys.argv[1], 'rb').read(); "
    "json.loads(gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw)"
)
HTA = (
    "import logging, os, sys, tempfile; logging.disable(logging.WARNING)\n"
    "from hta.trace_analysis import TraceAnalysis\n"
    "d = tempfile.mkdtemp(prefix='hta-bench-'); p = os.path.abspath(sys.argv[1])\n"
    "os.symlink(p, os.path.join(d, 'rank-0.json' + ('.gz' if p.endswith('.gz') else '')))\n"
    "TraceAnalysis(trace_dir=d)"
)
HTA_ROW = "HTA TraceAnalysis(df_index_resolver)"
PANDAS_SQL = (
    "import sqlite3, sys; import pandas as pd\n"
    "sys.path.insert(0, {bench!r}); from nsys_ingest import PANDAS_QUERIES\n"
    "conn = sqlite3.connect(f'file:{{sys.argv[1]}}?mode=ro', uri=True)\n"
    "frames = {{n: pd.read_sql(q, conn) for n, q in PANDAS_QUERIES.items()}}"
)


# Prints the modules one in-process `tracekit ARGS` leaves loaded: tracekit's, and the top-level
# packages of the others (importing those loads their submodules).
MODULES_OF_COMMAND = (
    "import contextlib, io, sys\n"
    "from tracekit.cli.main import main\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    main(sys.argv[1:])\n"
    "print(' '.join(sorted(m for m in sys.modules if m.startswith('tracekit.') or '.' not in m)))"
)
IMPORT_ALL = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)"


def imports_of(py: str, *args: str) -> list[str]:
    """The modules `tracekit ARGS` loads (run once in-process, in a child)."""
    out = subprocess.run([py, "-c", MODULES_OF_COMMAND, *args], check=True, capture_output=True, text=True)
    return [m for m in out.stdout.split() if not m.startswith("_") and m != "__main__"]


@dataclass
class Row:
    name: str
    argv: list[str]
    group: str  # rows of a group are compared with the group's anchor
    anchor: bool = False
    versus: tuple[str, ...] = ()  # names of other rows this one is also compared with (paired)
    floor_s: float | None = None
    floor_note: str = ""
    # (pristine, target): target is replaced by a copy of pristine before every run, untimed (a
    # first analysis of a dataset that holds no derived tables yet, as right after a streamed ingest)
    fresh: tuple[Path, Path] | None = None
    walls: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    failed: str | None = None


def make_rows(a: argparse.Namespace, tk: str, py: str, tmp: Path, ds_dfi: Path, ds_small: Path) -> list[Row]:
    """The rows to time, in table order; ingests the datasets ``ds_dfi`` and ``ds_small`` (and those
    of ``--big`` and ``--before``) that the rows read."""
    for src, ds in ((DFI, ds_dfi), (SMALL, ds_small)):
        subprocess.run([tk, "ingest", str(src), "--out", str(ds)], check=True, capture_output=True)
    has_hta = Path(a.hta_python).exists()
    rows: list[Row] = [
        Row("python -c pass (interpreter)", [py, "-c", "pass"], "start-up", anchor=True),
        Row("python -c 'import polars'", [py, "-c", "import polars"], "start-up"),
        Row("tracekit --help", [tk, "--help"], "start-up"),
        # the host's speed in this round (it swings 2× from minute to minute here): fixed
        # interpreter work, no I/O, so absolute figures of the round can be read against it
        Row(
            "reference: python loop of 5·10^6 additions",
            [py, "-c", "s = 0\nfor i in range(5 * 10**6): s += i"],
            "start-up",
        ),
        Row("json.load of nccl_data (0.75 MB gz)", [py, "-c", JSON_LOAD, str(SMALL)], "small", anchor=True),
        Row(
            "imports of `tracekit analyze nccl_data --format json`, no work",
            [py, "-c", IMPORT_ALL, *imports_of(py, "analyze", str(SMALL), "--format", "json")],
            "small",
        ),
        Row("tracekit summary nccl_data.json.gz", [tk, "summary", str(SMALL)], "small"),
        Row(
            "tracekit analyze nccl_data.json.gz --format json", [tk, "analyze", str(SMALL), "--format", "json"], "small"
        ),
        Row(
            "tracekit analyze DS(nccl_data) --format json --no-reuse",
            [tk, "analyze", str(ds_small), "--format", "json", "--no-reuse"],
            "small",
        ),
        Row(
            "tracekit analyze DS(nccl_data) --format json (stored result)",
            [tk, "analyze", str(ds_small), "--format", "json"],
            "small",
        ),
        Row("json.load of df_index_resolver (53.7 MB JSON)", [py, "-c", JSON_LOAD, str(DFI)], "dfi", anchor=True),
        Row(
            "imports of `tracekit ingest df_index_resolver`, no work",
            [py, "-c", IMPORT_ALL, *imports_of(py, "ingest", str(DFI), "--out", str(tmp / "ds_dfi_imports"))],
            "dfi",
            versus=(HTA_ROW,),
        ),
        Row(
            "tracekit ingest df_index_resolver",
            [tk, "ingest", str(DFI), "--out", str(tmp / "ds_dfi_again"), "--force"],
            "dfi",
            versus=(HTA_ROW,),
        ),
        Row(
            "tracekit analyze df_index_resolver.json.gz --format json",
            [tk, "analyze", str(DFI), "--format", "json"],
            "dfi",
        ),
        Row(
            "tracekit analyze DS(df_index_resolver) --format json --no-reuse",
            [tk, "analyze", str(ds_dfi), "--format", "json", "--no-reuse"],
            "dfi",
        ),
        Row(
            "tracekit analyze DS(df_index_resolver) --format json (stored result)",
            [tk, "analyze", str(ds_dfi), "--format", "json"],
            "dfi",
            versus=("tracekit analyze df_index_resolver.json.gz --format json",),  # re-analysis
        ),
    ]
    if has_hta:
        at = next(i for i, r in enumerate(rows) if r.group == "dfi")  # just before the dfi anchor
        rows.insert(at, Row(HTA_ROW, [a.hta_python, "-c", HTA, str(DFI)], "dfi"))
    if a.big:
        ds_big = tmp / "ds_big"
        subprocess.run([tk, "ingest", str(a.big), "--out", str(ds_big)], check=True, capture_output=True)
        shutil.copytree(ds_big, tmp / "ds_big_pristine")  # streamed: no derived tables in it
        # the later rows analyse a dataset whose derived tables are stored (what the first analysis leaves)
        subprocess.run([tk, "analyze", str(ds_big), "--format", "json"], check=True, capture_output=True)
        rows += [
            Row(f"json.load of {a.big.name}", [py, "-c", JSON_LOAD, str(a.big)], "big", anchor=True),
            Row(
                f"tracekit ingest {a.big.name}",
                [tk, "ingest", str(a.big), "--out", str(tmp / "ds_big_again"), "--force"],
                "big",
            ),
            Row(
                f"tracekit analyze DS({a.big.name}) --format json, first after ingest",
                [tk, "analyze", str(tmp / "ds_big_first"), "--format", "json", "-o", str(tmp / "big.json"), "--force"],
                "big",
                fresh=(tmp / "ds_big_pristine", tmp / "ds_big_first"),
            ),
            Row(
                f"tracekit analyze DS({a.big.name}) --no-reuse (table)",
                [tk, "analyze", str(ds_big), "--no-reuse"],
                "big",
            ),
            Row(
                f"tracekit analyze DS({a.big.name}) --format json --no-reuse",
                [tk, "analyze", str(ds_big), "--format", "json", "--no-reuse", "-o", str(tmp / "big.json"), "--force"],
                "big",
            ),
        ]
    if a.before:  # its own datasets: derived tables written by the other code would be stale to it
        swap = {}
        for src, ds in ((DFI, ds_dfi), (SMALL, ds_small), *(((a.big, tmp / "ds_big"),) if a.big else ())):
            swap[str(ds)] = str(ds) + "_b"
            subprocess.run([a.before, "ingest", str(src), "--out", swap[str(ds)]], check=True, capture_output=True)
        if a.big:  # the first-analysis twin starts from the older version's own streamed dataset
            shutil.copytree(swap[str(tmp / "ds_big")], tmp / "ds_big_pristine_b")
            swap[str(tmp / "ds_big_first")] = str(tmp / "ds_big_first_b")
            subprocess.run(
                [a.before, "analyze", swap[str(tmp / "ds_big")], "--format", "json"], check=True, capture_output=True
            )
        rows = interleave_before(rows, a.before, tk, swap, tuple(a.before_lacks))
    if a.nsys:
        rows += [
            Row(
                f"pandas.read_sql of {a.nsys.name}",
                [a.pandas_python, "-c", PANDAS_SQL.format(bench=str(REPO / "benchmarks")), str(a.nsys)],
                "nsys",
                anchor=True,
            ),
            Row(
                f"tracekit ingest {a.nsys.name}",
                [tk, "ingest", str(a.nsys), "--out", str(tmp / "ds_nsys"), "--force"],
                "nsys",
            ),
        ]
    if a.only:
        rows = [r for r in rows if any(s in r.group for s in a.only)]
    return rows


def interleave_before(rows: list[Row], before: str, tk: str, swap: dict[str, str], lacks: tuple[str, ...]) -> list[Row]:
    out: list[Row] = []
    for r in rows:
        out.append(r)
        if r.argv[0] == tk and "(stored result)" not in r.name:
            argv = [before if x == tk else swap.get(x, x) for x in r.argv if x not in lacks]
            argv = [x.replace("_again", "_before") for x in argv]
            fresh = (Path(str(r.fresh[0]) + "_b"), Path(swap[str(r.fresh[1])])) if r.fresh else None
            out.append(Row(r.name + " [before]", argv, r.group, fresh=fresh))
    return out
