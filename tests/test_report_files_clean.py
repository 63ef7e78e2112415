"""Control sequences in report files (issue 28): every text format written with ``--out`` gets
the terminal's cleaning (tracekit/cli/outfile.py). Before, names holding OSC 52, ``\\u202e`` or
NUL were written raw into ``report --format md|html --out`` files (only the terminal was
cleaned)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tracekit.conventions import TERMINAL_UNSAFE

from kineto_events import kernel
from cli_run import tk_out

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # write "echo pwned" to the clipboard
KERNEL_NAME = f"gemm{OSC52}\u202eevil\x00nul\x9bcsi"
REGION_NAME = f"tk:decode step=1 {OSC52}\u202e"
# what no report file may hold: C0 controls but tab and newline, DEL, C1, the bidi marks
RAW = re.compile("[\x00-\x08\x0b-\x1f" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in TERMINAL_UNSAFE) + "]")


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    events = [kernel(0, name=KERNEL_NAME), kernel(1)]
    events.append({"ph": "X", "cat": "user_annotation", "name": REGION_NAME, "pid": 1, "tid": 1, "ts": 90, "dur": 30})
    p = tmp_path / "hostile.json"
    p.write_text(json.dumps({"traceEvents": events}))
    return p


@pytest.mark.parametrize(
    "cmd, fmt",
    [
        ("report", "md"),
        ("report", "html"),
        ("analyze", "md"),
        ("analyze", "table"),
        ("diff", "md"),
        ("diff", "table"),
    ],
)
def test_text_report_files_show_controls_as_escapes(trace: Path, tmp_path: Path, cmd: str, fmt: str) -> None:
    out = tmp_path / f"out.{fmt}"
    args = [cmd, str(trace)] + ([str(trace)] if cmd == "diff" else [])
    tk_out(*args, "--format", fmt, "--no-plots" if cmd == "report" else "--force", "--out", str(out))
    text = out.read_text(encoding="utf-8")
    assert RAW.findall(text) == []
    # the kernel's name is in every one of them, its controls as visible escapes (Markdown
    # escapes the "]" after ESC as "\\]")
    assert re.search(r"\\x1b\\?\]52;c;ZWNobyBwd25lZA==\\x07", text) and "\\u202e" in text
    if cmd == "report":  # the whole name (analyze and diff shorten long names)
        assert "\\x00nul" in text and "\\x9bcsi" in text


@pytest.mark.parametrize("cmd", ["report", "analyze"])
def test_json_report_files_keep_the_names_as_json_escapes(trace: Path, tmp_path: Path, cmd: str) -> None:
    """JSON: C0 controls are JSON escapes already; C1 and bidi marks become \\uXXXX escapes.
    Parsed, the names are exactly those of the trace."""
    out = tmp_path / "out.json"
    tk_out(cmd, str(trace), "--format", "json", "--out", str(out))
    raw = out.read_text(encoding="utf-8")
    assert RAW.findall(raw) == [] and "\\u202e" in raw and "\\u009b" in raw
    doc = json.loads(raw)
    names = {k["name"] for k in doc["totals"]["top_kernels"]}
    assert KERNEL_NAME in names
