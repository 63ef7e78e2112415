"""Every command of README.md's "Try it on the sample traces" block runs as written, from the
repository root, and answers (issue 40 item 6): exit 0 and something on standard output or a file
written. The block is read from README.md itself, so an example that stops working fails here."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HEADING = "### Try it on the sample traces"


def readme_commands() -> list[str]:
    """The ``tracekit …`` lines of the first code block under :data:`HEADING`."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert HEADING in text, "README.md lost its sample-trace examples"
    block = re.search(r"```\n(.*?)```", text[text.index(HEADING) :], re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.startswith("tracekit ")]


def test_the_readme_block_is_found() -> None:
    cmds = readme_commands()
    # the block holds the whatif the issue named, a report, a diff, an ingest of sample folders
    assert len(cmds) >= 12 and any("whatif" in c and "--arrival poisson:60" in c for c in cmds)


def test_readme_commands_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In order, as a reader would type them, in a folder where ``sample_traces`` is the
    repository's (a later line may read what an earlier one wrote: the ingested dataset)."""
    try:
        import torch  # noqa: F401  (calibrate measures with torch: the workloads extra)
    except ImportError:
        torch_missing = True
    else:
        torch_missing = False
    (tmp_path / "sample_traces").symlink_to(REPO / "sample_traces")
    monkeypatch.chdir(tmp_path)
    failed = []
    for command in readme_commands():
        if torch_missing and "cpu.json" in command:
            continue
        before = {p for p in tmp_path.rglob("*") if p.is_file()}
        run = tk(*shlex.split(command)[1:])
        wrote = {p for p in tmp_path.rglob("*") if p.is_file()} - before
        if run.code != 0 or not (run.out.strip() or wrote):
            failed.append(f"{command}: exit {run.code}: {run.err.strip()[-300:] or 'no answer'}")
    assert not failed, "\n".join(failed)


def test_summary_of_a_cpu_trace_says_what_analyze_counts_as_kernels() -> None:
    # the llm sample is CPU-only: 0 launches and 2,596 cpu ops; `analyze` counts cpu ops' self time
    # as its kernels, and the summary says so instead of leaving "0 launches" to contradict it
    run = tk("summary", REPO / "sample_traces/llm/llm.pt.trace.json.gz")
    assert run.code == 0 and "0 launches, 2,596 cpu ops" in run.out
    assert "`analyze` stands the cpu ops' self time in for kernels" in run.out
