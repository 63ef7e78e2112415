"""Every text output reads as docs/reports.md promises (issue 25): Markdown that a GitHub-flavoured
parser (markdown-it-py, tables on) reads as the tables we wrote and nothing else — no line of text
glued under a table and read as one of its rows —, no number in scientific notation, and no noun
that disagrees with a count of one ("1 regions", "1 warning(s)").

The outputs: ``analyze`` (text, Markdown), ``report`` (Markdown, HTML), ``summary``, ``diff``
(text, Markdown) and ``whatif`` on a constructed trace where every count is one (one prefill step,
one decode step, one kernel each), on the runner's sample traces and on real shared traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from conftest import REPO, SHARED_TRACES
from cli_run import tk_out

SCIENTIFIC = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w])")
# a count of one with a plural noun, or a "(s)" plural
ONE_PLURAL = re.compile(
    r"(?<![\d.,=])1 (regions|steps|warnings|kernels|traces|activities|launches|ops|requests|tokens|cells|"
    r"ranks|points|replays|graph replays|calls|events|rows|collectives|repeats|items|sequences|culprits)\b"
    r"|\w\(s\)"
)


def one_of_each(tmp_path: Path) -> Path:
    """One prefill step and one decode step, each with one op, one launch and one kernel (µs)."""

    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    events = [
        x("user_annotation", "tk:prefill step=0 batch=1 prompt_tokens=16", 0, 100),
        x(
            "cpu_op",
            "aten::mm",
            10,
            30,
            **{"External id": 1, "Input Dims": [[16, 64], [64, 64]], "Input type": ["float", "float"]},
        ),
        x("cuda_runtime", "cudaLaunchKernel", 12, 5, correlation=1, **{"External id": 1}),
        x("kernel", "gemm_kernel", 20, 40, correlation=1, device=0, stream=7),
        x("user_annotation", "tk:decode step=1 batch=1 ctx=17", 200, 100),
        x(
            "cpu_op",
            "aten::mm",
            210,
            30,
            **{"External id": 2, "Input Dims": [[1, 64], [64, 64]], "Input type": ["float", "float"]},
        ),
        x("cuda_runtime", "cudaLaunchKernel", 212, 5, correlation=2, **{"External id": 2}),
        x("kernel", "gemv_kernel", 220, 10, correlation=2, device=0, stream=7),
    ]
    doc = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]}
    p = tmp_path / "one.json"
    p.write_text(json.dumps(doc))
    return p


TRACES = {
    "llm": REPO / "sample_traces/llm/llm.pt.trace.json.gz",
    "serve": REPO / "sample_traces/serve/serve.pt.trace.json.gz",
    "nccl": SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz",
    "sglang": SHARED_TRACES / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "nsys": SHARED_TRACES / "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
}


def outputs(trace: Path, tmp_path: Path) -> dict[str, str]:
    t = str(trace)
    got = {
        "analyze text": tk_out("analyze", t),
        "analyze md": tk_out("analyze", t, "--format", "md"),
        "summary": tk_out("summary", t),
        "diff text": tk_out("diff", t, t),
        "diff md": tk_out("diff", t, t, "--format", "md"),
    }
    for fmt in ("md", "html"):
        out = tmp_path / f"report.{fmt}"
        tk_out("report", t, "--format", fmt, "--no-plots", "--out", str(out), "--force")
        got[f"report {fmt}"] = out.read_text()
    return got


def table_rows_and_pipes(md: str) -> tuple[int, int]:
    """(rows of every table the GFM parser found, incl. headers; lines of the text that are table
    rows as written: they start with a pipe, outside <details> blocks' raw HTML lines)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    rows = sum(1 for tok in tokens if tok.type == "tr_open")
    written = sum(1 for line in md.splitlines() if line.startswith("|") and not line.startswith("|---"))
    return rows, written


def check(name: str, text: str) -> None:
    assert not SCIENTIFIC.findall(text), f"{name}: scientific notation {SCIENTIFIC.findall(text)[:5]}"
    assert not ONE_PLURAL.findall(text), f"{name}: {[m.group(0) for m in ONE_PLURAL.finditer(text)][:5]}"
    if name.endswith("md"):
        rows, written = table_rows_and_pipes(text)
        assert rows == written, f"{name}: the parser reads {rows} table rows where {written} were written"


def test_the_gfm_check_can_fail() -> None:
    """A text line glued under a table is read as a row of it; a blank line keeps it text."""
    glued = "| a | b |\n|---|---|\n| 1 | 2 |\nwarning: text under the table\n"
    assert table_rows_and_pipes(glued) == (3, 2)
    assert table_rows_and_pipes(glued.replace("\nwarning", "\n\nwarning")) == (2, 2)
    with pytest.raises(AssertionError):
        check("x md", glued)
    with pytest.raises(AssertionError):
        check("x text", "1 regions labelled")
    with pytest.raises(AssertionError):
        check("x text", "took 1.44e+03 ms")


def test_counts_of_one(tmp_path: Path) -> None:
    trace = one_of_each(tmp_path)
    got = outputs(trace, tmp_path)
    for name, text in got.items():
        check(name, text)
    # the counts of one are there, in the singular
    assert "Regions (2, most device time first)" in got["analyze text"]
    # batch 1: one token from the prefill, one from the decode step, done at its CPU end (300 µs)
    # after the prefill began (0 µs): 2 / 300 µs = 6,667 tok/s
    assert "output 6.67 ktok/s (2 tokens)" in got["analyze text"]
    assert "| prefill | 1 |" in got["analyze md"]  # one step in the phases table


@pytest.mark.parametrize("name", sorted(TRACES))
def test_real_traces(name: str, tmp_path: Path) -> None:
    for out, text in outputs(TRACES[name], tmp_path).items():
        check(f"{name} {out}", text)


def test_whatif_text() -> None:
    check("whatif", tk_out("whatif", str(TRACES["serve"])))
    check(
        "whatif hand",
        tk_out("whatif", "--prefill-ms", "1", "--tpot-ms", "0.00001", "--decode-steps", "1"),
    )
