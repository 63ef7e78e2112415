"""Report renderers over a hand-made analysis result (tests/test_report_helpers.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import EVIL, EVIL_PIPE, sample_activities, sample_doc, with_tops  # noqa: E402

from tracekit.report import fmt, model  # noqa: E402
from tracekit.report.plots import figures
from tracekit.report.formats import html
from tracekit.report.formats import markdown
from tracekit.report.formats import json as rjson


def data() -> model.ReportData:
    return model.from_json(
        with_tops(sample_doc()),
        activities=sample_activities(),
        environment={"rows": [("torch_version", "2.13.0")]},
    )


def test_formatting_units() -> None:
    assert fmt.value("span_ns", 2_500_000) == "2.5 ms"
    assert fmt.value("gap_max_ns", 1500) == "1.5 µs"
    assert fmt.value("achieved_flops_per_s", 5e14) == "500 TFLOP/s"
    assert fmt.value("achieved_bytes_per_s", 1.25e12) == "1.25 TB/s"
    assert fmt.value("coverage", 0.9) == "90.0 %"
    assert fmt.value("frac_peak_flops", 0.5056) == "50.6 %"
    assert fmt.value("intensity", 400.0) == "400 FLOP/B"
    assert fmt.value("ttft_p50_ms", 10.0) == "10 ms"
    assert fmt.value("flops", 4e12) == "4 TFLOP"
    # a count of steps per verdict follows its metric, not the verdict's word (it printed "1 B/s")
    assert fmt.value("steps.bandwidth", 1) == "1" and fmt.value("bandwidth", 12) == "12"
    assert fmt.value("peak_bandwidth", 2e12) == "2 TB/s"
    # regular plurals (no "launchs"); a shared-ms column goes to seconds from 10 s up
    assert fmt.count(3, "graph launch") == "3 graph launches" and fmt.count(2, "step") == "2 steps"
    assert fmt.ms(61_638e6) == "61.6 s" and fmt.ms(9_999e6) == "9999 ms"
    assert fmt.value("span_ns", None) == "–"
    assert fmt.value("intensity", float("nan")) == "–"


def test_md_escape_neutralises_html_and_table_syntax() -> None:
    assert fmt.md_escape(EVIL) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    # a pipe would end the table cell; backticks/asterisks would become code/emphasis
    assert fmt.md_escape(EVIL_PIPE) == r"a\|b \`c\` \*d\*"
    assert fmt.md_escape("a\nb") == "a b"
    assert fmt.md_escape("it's") == "it&#x27;s"  # the entity survives (no backslash inside it)


def test_markdown_report_tables_and_escaping() -> None:
    text = markdown.render(data(), None)
    assert EVIL not in text and "<script" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| phase | verdict | reason | region count"))
    ncols = header.count(" | ") + 1
    # every row of the phase table has as many cells as the header: the pipe in the reason was escaped
    rows = lines[lines.index(header) + 2 : lines.index(header) + 4]
    assert [r.split(" | ")[0] for r in rows] == ["| prefill", "| decode"]
    # phase, verdict, reason (first: visible without scrolling), region count, span, busy, busy %, idle,
    # gap count, kernel count
    assert ncols == 10
    # in every table block, every line has the header's number of unescaped pipes
    block: list[str] = []
    for ln in [*lines, ""]:
        if ln.startswith("|"):
            block.append(ln)
        elif block:
            counts = {b.replace("\\|", "").count("|") for b in block}
            assert len(counts) == 1, block
            block = []
    # prefill: busy 8 ms of a 10 ms span = 80.0 %; 4e12 FLOP over 8 ms busy = 500 TFLOP/s
    assert "| 1 | 10 ms | 8 ms | 80.0 % |" in text and text.count("| prefill | compute |") >= 1
    assert "500 TFLOP/s" in text
    assert "tpot p50" in text and "5 ms" in text
    # long lists fold: top kernels per phase are in <details>
    assert "<details>" in text and "<summary>top kernels: prefill (2 rows)</summary>" in text
    assert "launched from another thread" in text and "250 µs" in text
    assert "85.0 %" in text  # whole-trace coverage


def test_markdown_writes_plots_beside(tmp_path: Path) -> None:
    d = data()
    text = markdown.render(d, figures.draw_all(d), tmp_path / "r_plots", "r_plots/")
    assert "![Roofline](r_plots/roofline.png)" in text
    png = (tmp_path / "r_plots" / "roofline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_is_self_contained_and_escaped() -> None:
    d = data()
    page = html.render(d, figures.draw_all(d))
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'id="phase-table"' in page
    # nothing fetched from elsewhere: images are data URIs, no http(s) references at all
    assert "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 4  # roofline, timeline, decode, breakdown
    assert "script-src" not in page or "default-src 'none'" in page


def test_missing_plot_data_becomes_a_note() -> None:
    doc = sample_doc()
    doc["device"] = {"name": "mystery", "hint": "no peaks known for device mystery: pass --hardware NAME"}
    for r in doc["regions"]:
        r["ctx"] = None
    d = model.from_json(doc)
    figs = {f.kind: f for f in figures.draw_all(d)}
    assert figs["decode"].figure is None and "context length" in figs["decode"].missing
    # peaks: the device has none, and the phases carry none either
    assert figs["roofline"].figure is None and "peaks unknown" in figs["roofline"].missing
    text = markdown.render(d, list(figs.values()))
    assert "Roofline: not drawn — roofline: device peaks unknown" in text
    assert "no peaks known for device mystery" in text


def test_json_report_is_strict_json() -> None:
    doc = sample_doc()
    doc["regions"][0]["intensity"] = float("nan")
    d = model.from_json(doc, environment={"rows": [("torch_version", "2.13.0")]})
    out = json.loads(rjson.render(d))
    assert out["regions"][0]["intensity"] is None
    assert out["environment"] == [["torch_version", "2.13.0"]]
    assert set(out) >= {"trace", "device", "diagnostic", "regions", "phases", "unattributed", "totals"}


def test_cpu_diagnostic_is_stated() -> None:
    doc = sample_doc()
    doc["diagnostic"] = "CPU diagnostic — not GPU evidence"
    text = markdown.render(model.from_json(doc))
    assert "CPU DIAGNOSTIC: not GPU evidence — the self time of CPU operators" in text
    assert "CPU diagnostic —" not in text
    page = html.render(model.from_json(doc))
    assert '<p class="diag">CPU DIAGNOSTIC' in page


def test_rows_and_frame_of_the_document() -> None:
    doc = {
        "phases": [
            {"phase": "decode", "busy_ns": 1, "latency": {"tpot": {"unit": "ms", "p50": 2.0}}},
            {"phase": "prefill", "busy_ns": 3, "top_kernels": [{"rank": 1, "name": "k", "dims": [1, 2]}]},
        ]
    }
    d = model.from_json(doc)  # type: ignore[arg-type]
    # prefill before decode (PHASE_ORDER); the latency percentile becomes a key with its unit
    assert [(p["phase"], p.get("tpot_p50_ms")) for p in d.rows("phases")] == [("prefill", None), ("decode", 2.0)]
    assert d.rows("top_kernels") == [{"phase": "prefill", "rank": 1, "name": "k", "dims": [1, 2]}]
    # the frame leaves the nested top list out and joins a list into text
    assert d.frame("phases").columns == ["phase", "busy_ns", "tpot_p50_ms"]
    assert d.frame("top_kernels")["dims"].to_list() == ["1, 2"]
    assert d.rows("regions") == [] and d.frame("regions").height == 0
