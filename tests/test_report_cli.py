"""tracekit report / plot on the tiny hand-made trace and on real traces; bad input in one line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).parent))
from cli_run import Run, tk  # noqa: E402
from test_report_helpers import EVIL, tiny_trace_doc, write_tiny_trace  # noqa: E402


def _one_line_error(code: int, run: Run, needle: str) -> None:
    """``run`` exited with ``code`` and said why in one line of stderr holding ``needle``."""
    err = run.err
    assert run.code == code and needle in err, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err


def test_report_md_with_plots(tmp_path: Path) -> None:
    trace = write_tiny_trace(tmp_path / "tiny.json")
    out = tmp_path / "r.md"
    assert tk("report", str(trace), "--out", str(out)).code == 0
    text = out.read_text()
    assert EVIL not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    # the tiny trace: prefill kernel 30 µs in a window 0–300 µs (CPU start → next step); decode
    # kernels 10 + 5 µs in windows 300–500 and 500–605 µs (305 µs): busy 10 % and 5 % → overhead;
    # aten::mm 2·64·128·256 = 4,194,304 FLOP
    # phase table: phase, verdict, reason, region count, span, busy (verdict first: visible without scrolling)
    assert re.search(r"\| prefill \| overhead \| [^|]+ \| 1 \| 300 µs \| 30 µs \|", text)
    assert re.search(r"\| decode \| overhead \| [^|]+ \| 2 \| 305 µs \| 15 µs \|", text)
    assert "4.19 MFLOP" in text
    assert "NVIDIA H100 80GB HBM3" in text
    assert (tmp_path / "r_plots" / "roofline.png").is_file()
    assert "![Roofline](r_plots/roofline.png)" in text


def test_report_json_and_sidecar(tmp_path: Path) -> None:
    trace = write_tiny_trace(tmp_path / "run.pt.trace.json")
    (tmp_path / "run.tracekit.json").write_text(
        json.dumps(
            {
                "workload": "llm",
                "torch_version": "2.13.0",
                "config": {"batch": 4, "max_seqs": 8, "token_budget": 256},
                "hf_token": "SECRET-DO-NOT-PRINT",
            }
        )
    )
    out = tmp_path / "r.json"
    assert tk("report", str(trace), "--out", str(out)).code == 0  # format from the suffix
    doc = json.loads(out.read_text())
    env = dict((k, v) for k, v in doc["environment"])
    assert env["runner config.batch"] == 4 and env["runner config.token_budget"] == 256
    assert env["runner torch_version"] == "2.13.0"
    assert "SECRET-DO-NOT-PRINT" not in out.read_text()
    assert [p["phase"] for p in doc["phases"]] == ["prefill", "decode"]


def test_report_trace_without_shapes(tmp_path: Path) -> None:
    doc = tiny_trace_doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["args"] = {"External id": e["args"]["External id"]}
    p = tmp_path / "noshapes.json"
    p.write_text(json.dumps(doc))
    out = tmp_path / "r.md"
    assert tk("report", str(p), "--out", str(out)).code == 0
    text = out.read_text()
    assert "unknown" in text  # no shapes → coverage 0 and verdict unknown, never a made-up number
    assert "Roofline: not drawn — roofline: no region or phase has FLOPs" in text


def test_plot_cli(tmp_path: Path) -> None:
    trace = write_tiny_trace(tmp_path / "tiny.json")
    for kind, suffix in (("roofline", "svg"), ("timeline", "png"), ("decode", "png"), ("breakdown", "svg")):
        out = tmp_path / f"{kind}.{suffix}"
        assert tk("plot", kind, str(trace), "--out", str(out)).code == 0
        head = out.read_bytes()[:300]
        assert head.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in head


def test_bad_input_one_line(tmp_path: Path) -> None:
    trace = write_tiny_trace(tmp_path / "tiny.json")
    assert tk("report", str(trace), "--out", str(tmp_path / "made" / "r.md")).code == 0  # the folder is made
    _one_line_error(2, tk("report", str(trace), "--out", str(trace / "sub" / "r.md")), "cannot create the folder")
    existing = tmp_path / "r.html"
    existing.write_text("old")
    _one_line_error(2, tk("report", str(trace), "--out", str(existing)), "already exists; pass --force")
    assert existing.read_text() == "old"
    _one_line_error(
        2,
        tk("report", str(trace), "--format", "html", "--out", str(tmp_path / "r.txt")),
        "output must end in .html or .htm",
    )
    _one_line_error(2, tk("plot", "roofline", str(trace), "--out", str(tmp_path / "x.jpg")), ".png or .svg")
    # no device work and no CPU operators: nothing to report
    empty = tmp_path / "empty.json"
    empty.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": "tk:prefill step=0",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 10,
                    }
                ]
            }
        )
    )
    _one_line_error(5, tk("report", str(empty)), "nothing to report")
    # a plot whose data is missing says what is missing
    _one_line_error(
        2,
        tk("plot", "sweep", str(tmp_path), "--out", str(tmp_path / "s.png")),
        "no phase_shape.parquet or phase_shape.csv",
    )


def test_report_real_trace_html(tmp_path: Path, shared_traces: Path) -> None:
    src = shared_traces / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
    out = tmp_path / "sglang.html"
    assert tk("report", str(src), "--out", str(out)).code == 0
    page = out.read_text()
    assert 'id="phase-table"' in page and ">prefill<" in page
    assert "<script" not in page.lower()
    assert page.count("data:image/png;base64,") >= 2
