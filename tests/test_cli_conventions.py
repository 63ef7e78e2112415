"""Every command follows the CLI's one set of conventions (tracekit/cli/options.py).

The commands are found by walking click's command tree, not from a list: a command added later is
checked too. Static rules are checked on every command; the behaviour of each command that writes
a file (refuses to overwrite without --force, overwrites with it) is run for real, and a writing
command without a sample invocation in SAMPLES fails the test until one is added.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tracekit.cli.main import cli
from tracekit.conventions import CPU_DIAGNOSTIC
from tracekit.hardware.peaks import table_keys
from golden import kineto as gk
from cli_run import tk

REPO = Path(__file__).resolve().parent.parent
LLM = REPO / "sample_traces/llm/llm.pt.trace.json.gz"  # a CPU run: every output carries the diagnostic
XSS = "<img src=x onerror=alert(1)>"


def leaves(cmd: click.Command = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            yield from leaves(sub, (*path, name))
    else:
        yield path, cmd


COMMANDS = dict(leaves())


def _opt(cmd: click.Command, name: str) -> click.Option | None:
    return next((p for p in cmd.params if isinstance(p, click.Option) and p.name == name), None)


def test_the_walk_finds_the_commands() -> None:
    # Not a list to keep in step: a floor, so the walk itself cannot silently find nothing.
    assert {("analyze",), ("diff",), ("label",), ("report",), ("run", "llm"), ("ingest",)} <= set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_static_conventions(path: tuple[str, ...]) -> None:
    cmd = COMMANDS[path]
    opts = {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    assert "--output" not in opts, "the output option is --out/-o everywhere"
    if "-o" in opts:
        assert opts["-o"].name == "out"
    out = _opt(cmd, "out")
    if out is not None:
        assert {"--out", "-o"} <= set(out.opts), f"{path}: --out needs the -o short form"
        force = _opt(cmd, "force")
        assert force is not None and force.is_flag and force.opts == ["--force"], f"{path}: writes, so needs --force"
    fmt = opts.get("--format")
    if fmt is not None and isinstance(fmt.type, click.Choice):
        names = set(fmt.type.choices)
        assert ("md" in names) == ("markdown" in names), f"{path}: md and markdown are the same format"
    for o, p in opts.items():
        if o == "--hardware":
            missing = [k for k in table_keys() if k not in (p.help or "")]
            assert not missing, f"{path} {o}: help does not list {missing}"
        if o.startswith("--trace-id"):
            assert "prefix" in (p.help or ""), f"{path} {o}: say that a unique prefix is enough"


@pytest.fixture(scope="module")
def gpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPU trace whose decode region is named like an HTML injection."""
    d = tmp_path_factory.mktemp("conv")
    return gk.write(
        d / "gpu.json",
        [
            gk.region("tk:prefill step=0 batch=1 ctx=4", 0, 100),
            gk.launch(10, corr=1),
            gk.kernel("k1", 20, 50, corr=1),
            gk.region(XSS, 200, 100),
            gk.launch(210, corr=2),
            gk.kernel("k2", 220, 50, corr=2),
        ],
    )


# One invocation per command that writes: OUT is replaced by the output path, TRACE by the tiny trace.
SAMPLES: dict[tuple[str, ...], list[str]] = {
    ("analyze",): ["analyze", "TRACE", "--format", "json"],
    ("report",): ["report", "TRACE", "--format", "json"],
    ("plot",): ["plot", "timeline", "TRACE"],
    ("diff",): ["diff", "TRACE", "TRACE"],
    ("label",): ["label", "TRACE"],
    ("ingest",): ["ingest", "TRACE"],
    ("calibrate",): ["calibrate", "--device", "cpu", "--quick"],
    ("summary",): ["summary", "TRACE"],
    ("whatif",): ["whatif", "--prefill-ms", "40", "--tpot-ms", "5", "--decode-steps", "20"],
}
SUFFIX = {("plot",): ".svg", ("ingest",): "", ("calibrate",): ".json"}
RUNS = [p for p in COMMANDS if p[0] == "run"]  # need torch to succeed: only the refusal is run


def test_every_writing_command_has_a_sample() -> None:
    writers = {p for p, c in COMMANDS.items() if _opt(c, "out") is not None}
    assert writers - set(RUNS) == set(SAMPLES), "add a sample invocation to SAMPLES for a new command that writes"


@pytest.mark.parametrize("path", sorted(SAMPLES), ids=" ".join)
def test_force_is_needed_to_overwrite(path: tuple[str, ...], gpu_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / ("out" + SUFFIX.get(path, ".json"))
    args = [str(gpu_trace) if a == "TRACE" else a for a in SAMPLES[path]] + ["-o", str(out)]
    code, _, err = tk(*args)
    assert code == 0 and out.exists(), err
    before = out.stat().st_mtime_ns if out.is_file() else None
    code, stdout, err = tk(*args)
    assert code != 0 and "--force" in stdout + err and "Traceback" not in err
    if before is not None:
        assert out.stat().st_mtime_ns == before
    code, _, err = tk(*args, "--force")
    assert code == 0, err


@pytest.mark.parametrize("path", RUNS, ids=" ".join)
def test_run_refuses_a_non_empty_directory(path: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("keep me")
    code, _, err = tk(*path, "--out", str(tmp_path))
    assert code != 0 and "pass --force to overwrite" in err and (tmp_path / "old.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for p, c in COMMANDS.items()
        if _opt(c, "fmt") is not None and "md" in getattr(_opt(c, "fmt").type, "choices", ())
    ),
    ids=" ".join,
)
def test_md_and_markdown_are_one_format(path: tuple[str, ...], gpu_trace: Path) -> None:
    base = SAMPLES[path]
    args = [str(gpu_trace) if a == "TRACE" else a for a in base if a not in ("--format", "json")]
    outs = []
    for name in ("md", "markdown"):
        code, out, err = tk(*args, "--format", name, *(["--no-plots"] if path == ("report",) else []))
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1]
    # Names from the trace are HTML-escaped in every Markdown output.
    if path != ("diff",):  # diff compares region kinds, where the name shows with numbers as N
        assert XSS not in outs[0] and "&lt;img src=x onerror=alert(1)&gt;" in outs[0]


def test_trace_id_prefix(gpu_trace: Path, tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    second = tmp_path / "gpu2.json"
    shutil.copy(gpu_trace, second)
    assert tk("ingest", str(gpu_trace), str(second), "-o", str(ds))[0] == 0
    from tracekit.tables.trace import dataset_trace_ids

    a, b = dataset_trace_ids(ds)  # gpu-…, gpu2-…: "gpu2" is a unique prefix, "gpu" is not
    code, out, _ = tk("analyze", str(ds), "--trace-id", "gpu2", "--format", "json")
    assert code == 0 and f'"id": "{b}"' in out
    code, _, err = tk("analyze", str(ds), "--trace-id", "gpu", "--format", "json")
    assert code != 0 and "ambiguous" in err and len(err.strip().splitlines()) == 1
    code, out, err = tk("diff", str(ds), str(ds), "--trace-id", a[:6], "--trace-id-b", "gpu2", "--format", "json")
    assert code == 0, err
    assert '"a": "' in out


def test_cpu_diagnostic_on_every_output(tmp_path: Path) -> None:
    code, out, err = tk("diff", str(LLM), str(LLM))
    assert code == 0 and f"A: {CPU_DIAGNOSTIC}" in out and f"B: {CPU_DIAGNOSTIC}" in out, err
    code, out, err = tk("diff", str(LLM), str(LLM), "--format", "md")
    assert code == 0 and CPU_DIAGNOSTIC in out
    from tracekit.report.plots import figures
    from tracekit.report.from_path import analyse_path

    data = analyse_path(str(LLM)).report_data()
    fig = figures.draw("timeline", data)
    assert [t.get_text() for t in fig.texts].count(CPU_DIAGNOSTIC) == 1
    import polars as pl

    sweep = pl.read_csv(REPO / "sample_traces/phase_shape/phase_shape.csv")
    from tracekit.report.plots import draw as plots

    fig = plots.sweep(sweep.with_columns(pl.lit(CPU_DIAGNOSTIC).alias("diagnostic")))
    assert CPU_DIAGNOSTIC in [t.get_text() for t in fig.texts]
