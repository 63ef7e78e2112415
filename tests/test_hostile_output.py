"""Names are data (issue 13): trace-provided names never act as markup in Markdown, as terminal
control sequences on screen, or as mathtext in plots."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tracekit.cli.term import clean

from kineto_events import kernel  # noqa: E402
from cli_run import tk_process

ESC_NAME = "a\nb|c\x1b]0;pwned\x07\x1b[31m\u202eevil"
MARKUP = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<base href=//evil>"]
MATH_DEVICE = "$\\frac{a}{$ GPU"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    events = [kernel(i, name=n) for i, n in enumerate([*MARKUP, ESC_NAME])]
    events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": MARKUP[2] + "\nnext line",
            "pid": 1,
            "tid": 1,
            "ts": 90,
            "dur": 100,
        }
    )
    p = tmp_path / "hostile.json"
    p.write_text(
        json.dumps({"deviceProperties": [{"id": 0, "name": MATH_DEVICE, "numSms": 10}], "traceEvents": events})
    )
    return p


def test_clean_makes_controls_visible() -> None:
    assert clean("a\x1b]0;t\x07b\tc\nd\x9b\u202e") == "a\\x1b]0;t\\x07b\tc\nd\\x9b\\u202e"


@pytest.mark.parametrize("cmd", [["summary"], ["analyze"], ["analyze", "--format", "md"], ["report", "--format", "md"]])
def test_no_terminal_control_reaches_stdout(hostile: Path, cmd: list[str]) -> None:
    proc = tk_process(*cmd, str(hostile))
    assert proc.returncode == 0, proc.stderr
    for bad in ("\x1b", "\x07", "\u202e"):
        assert bad not in proc.stdout and bad not in proc.stderr


def test_diff_strips_controls(hostile: Path) -> None:
    proc = tk_process("diff", str(hostile), str(hostile))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout


def test_summary_name_stays_on_one_line(hostile: Path) -> None:
    out = tk_process("summary", str(hostile)).stdout
    line = next(ln for ln in out.splitlines() if "pwned" in ln)
    assert line.rstrip().endswith("\\x1b[31m\\u202eevil") and "a b|c\\x1b]0;pwned\\x07" in line


@pytest.mark.parametrize("cmd", [["analyze", "--format", "md"], ["report", "--format", "md"]])
def test_markdown_escapes_markup_and_newlines(hostile: Path, cmd: list[str]) -> None:
    out = tk_process(*cmd, str(hostile)).stdout
    for raw in MARKUP:
        assert raw not in out
    assert "&lt;base href=//evil&gt;" in out
    for line in out.splitlines():  # a name with a newline never breaks a table row
        if line.startswith("|"):
            assert line.rstrip().endswith("|"), line


def test_error_line_strips_controls(tmp_path: Path) -> None:
    p = tmp_path / "bad\x1b]0;x\x07.json"
    p.write_text("not json")
    proc = tk_process("summary", str(p))
    assert proc.returncode != 0
    assert "\x1b" not in proc.stderr and "\\x1b]0;x\\x07" in proc.stderr


@pytest.fixture(scope="module")
def math_trace(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace with shapes (TraceLens H100 Qwen forward) whose device is renamed to mathtext."""
    src = shared_traces / "kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for d in doc.get("deviceProperties", []):
        d["name"] = MATH_DEVICE
    out = tmp_path_factory.mktemp("math") / "bert.json"
    out.write_text(json.dumps(doc))
    return out


def test_plot_with_mathtext_device_name(math_trace: Path, tmp_path: Path) -> None:
    png = tmp_path / "roof.png"
    proc = tk_process("plot", "roofline", str(math_trace), "--hardware", "h100-sxm", "--out", str(png))
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_with_mathtext_device_name(math_trace: Path, tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    proc = tk_process("report", str(math_trace), "--hardware", "h100-sxm", "--format", "html", "--out", str(html))
    assert proc.returncode == 0, proc.stderr
    assert "data:image/png;base64" in html.read_text()


def test_plain_text_keeps_names_literal() -> None:
    from tracekit.report.plots import canvas
    from tracekit.report.plots import draw as plots

    fig = canvas.figure()
    ax = fig.add_subplot()
    ax.barh([MATH_DEVICE, "ok $x$"], [1, 2])
    ax.set_title(MATH_DEVICE)
    ax.set_xscale("log")
    ax.legend([MATH_DEVICE])
    assert plots.to_bytes(fig)[:4] == b"\x89PNG"  # drew (mathtext would raise on the name)
    assert not ax.title.get_parse_math()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["\\$\\frac{a}{\\$ GPU", "ok \\$x\\$"]  # shown as $


def test_json_output_is_terminal_safe_and_still_valid_json(hostile: Path, tmp_path: Path) -> None:
    # ESC_NAME holds ESC and BEL (JSON escapes them as \u001b, \u0007) and U+202E, which JSON would
    # print raw: report/formats/json_print.py writes it as the escape \u202e. Parsing gives the name back
    # exactly, from the computed output and from the stored result of a dataset (printed as stored).
    proc = tk_process("analyze", "--format", "json", str(hostile))
    assert proc.returncode == 0, proc.stderr
    assert "\u202e" not in proc.stdout and "\x1b" not in proc.stdout and "\\u202e" in proc.stdout
    assert any(ESC_NAME in v for v in _strings(json.loads(proc.stdout)))
    ds = tmp_path / "ds"
    assert tk_process("ingest", str(hostile), "--out", str(ds)).returncode == 0
    first = tk_process("analyze", "--format", "json", str(ds))
    second = tk_process("analyze", "--format", "json", str(ds))  # the stored result, written as stored
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout and "\u202e" not in second.stdout
    assert any(ESC_NAME in v for v in _strings(json.loads(second.stdout)))


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for v in [*x.keys(), *x.values()] for s in _strings(v)]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v)]
    return []


def test_json_safe_precheck_finds_every_unsafe_character() -> None:
    # report/formats/json_print.py checks per lead byte before escaping: each of the 44 terminal-unsafe
    # characters is found among many harmless characters of the same lead byte (µ = C2 B5,
    # – = E2 80 93), and a document holding only harmless ones comes back as the same bytes.
    import json

    from tracekit.conventions import TERMINAL_UNSAFE
    from tracekit.report.formats.json_print import safe

    harmless = json.dumps({"t": "12.5 µs – 3 µs " * 50}, ensure_ascii=False).encode()
    assert safe(harmless) is harmless
    for lo, hi in TERMINAL_UNSAFE:
        for c in range(lo, hi + 1):
            doc = json.dumps({"t": "12.5 µs – " * 50 + chr(c) + " µs"}, ensure_ascii=False).encode()
            out = safe(doc)
            assert chr(c).encode() not in out and b"\\u%04x" % c in out
            assert json.loads(out) == json.loads(doc)


def test_json_pieces_escape_what_the_whole_document_escapes() -> None:
    # report/jsonout.document_parts checks each chunk of rows for terminal-unsafe characters in
    # its compact JSON (formatting copies strings as they are) and escapes its printed rows when
    # one is there: the pieces are the whole document's bytes, with and without such names.
    import msgspec

    from tracekit.report.formats.json_print import document, document_parts

    rows = [{"name": n, "x": [1, {"y": n}]} for n in ("plain", ESC_NAME, "µ", "\u2066x", "\x7fz", "ok")]
    for depth in (1, 2, 3):
        doc: dict[str, object] = {"regions": rows, "z": [1.5, None]}
        skel: dict[str, object] = {"regions": "tok", "z": [1.5, None]}
        for _ in range(depth - 1):
            doc, skel = {"a": 1, "in": doc}, {"a": 1, "in": skel}
        whole = document(msgspec.json.encode(doc))
        assert "\u202e" not in whole.decode() and b"\\u202e" in whole and b"\\u007f" in whole
        for size in (1, 2, 4, 6):
            arrays = [msgspec.json.encode(rows[i : i + size]) for i in range(0, len(rows), size)]
            parts = list(document_parts(msgspec.json.encode(skel), msgspec.json.encode("tok"), [b"[]", *arrays]))
            assert b"".join(parts) == whole, (depth, size)
