"""One document model for every output (issue 34, item 2): the ``analyze`` screen and the report
render their selections of one section registry (tracekit/report/sections/registry.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import sample_doc  # noqa: E402

from cli_run import tk_out  # noqa: E402
from tracekit.report import fmt, model  # noqa: E402
from tracekit.report.formats import markdown  # noqa: E402
from tracekit.report.screens.analyze import render as screen  # noqa: E402
from tracekit.report.sections.blocks import Document, Section  # noqa: E402
from tracekit.report.sections.registry import BOTH, SCREEN, SECTIONS, Entry  # noqa: E402

NCCL = "kineto/hta/nccl_parser_config/nccl_data.json.gz"


def decode_span(d: Document) -> Section:
    """A made-up section: the decode regions' span, read from the analysis document alone."""
    ns = sum(r.get("span_ns") or 0 for r in d.doc["regions"] if r.get("phase") == "decode")
    return Section("Decode span", [f"decode regions span {fmt.duration(ns)} in all"], anchor="decode-span")


def test_a_new_section_is_one_function_and_one_registry_line() -> None:
    """Registered for both outputs, the section appears on the screen (text and Markdown) and in
    the report's Markdown; registered for the screen only, it stays out of the report. The sample
    document's decode regions span 2 + 3 + 4 ms (tests/test_report_helpers.py) = 9 ms."""
    doc = sample_doc()
    data = model.from_json(doc)
    line = "decode regions span 9 ms in all"
    both = (*SECTIONS, Entry("decode span", decode_span, BOTH))
    text, md = screen(doc, registry=both), markdown.render(data, registry=both)
    assert f"\nDecode span\n===========\n{line}\n" in text
    assert f"\n## Decode span\n\n{line}\n" in screen(doc, markdown=True, registry=both)
    assert f"\n## Decode span\n\n{line}\n" in md
    # registry order: the new last entry comes after the last section of each output
    assert text.index("Decode span") > text.index("\nAttribution\n")
    assert md.index("## Decode span") > md.index("## Cost-model coverage")
    screen_only = (*SECTIONS, Entry("decode span", decode_span, SCREEN))
    assert line in screen(doc, registry=screen_only) and line not in markdown.render(data, registry=screen_only)
    assert line not in screen(doc) and line not in markdown.render(data)  # the registry itself is unchanged


def test_report_shows_the_communication_rows_of_analyze(shared_traces: Path) -> None:
    """The NCCL training trace (no phase annotations: a "trace" and an "unphased" row, the same
    21 collectives): its kernels' 'In msg nelems' × 4 B (Float) add up to 307,323,096 B
    (tests/test_dask_ranks.py sums them from the raw JSON) → "307 MB" at 3 significant digits; the
    bandwidth is those bytes over the collectives' own time. `tracekit report --format md` shows
    the same rows as the `analyze` screen."""
    path = str(shared_traces / NCCL)
    doc = json.loads(tk_out("analyze", path, "--format", "json"))
    rows = doc["totals"]["communication"]
    assert [(c["phase"], c["comm_count"], c["comm_bytes"]) for c in rows] == [
        ("trace", 21, 307_323_096),
        ("unphased", 21, 307_323_096),
    ]
    assert rows[0]["algbw_bytes_per_s"] == pytest.approx(307_323_096 / (rows[0]["sized_ns"] * 1e-9))
    md = tk_out("report", path, "--format", "md", "--no-plots")
    assert "## Communication" in md
    md_rows = [
        line.strip("| ").split(" | ") for line in md.splitlines() if line.startswith(("| trace |", "| unphased |"))
    ]
    # world size 2: all-reduce's bus factor 2·1/2 = 1 and broadcast's 1, so bus bandwidth = bandwidth
    assert rows[0]["busbw_bytes_per_s"] == pytest.approx(rows[0]["algbw_bytes_per_s"])
    bw = [fmt.value("algbw_bytes_per_s", r["algbw_bytes_per_s"]) for r in rows]
    assert [r[:2] + r[5:] for r in md_rows] == [
        ["trace", "21", "307 MB", bw[0], bw[0]],
        ["unphased", "21", "307 MB", bw[1], bw[1]],
    ]
    text = screen(doc)  # what `tracekit analyze TRACE` prints for this document
    comm = text.split("\nCommunication (")[1].split("\n\n")[0].splitlines()
    screen_rows = [line.split() for line in comm if line.startswith(("trace ", "unphased "))]
    assert screen_rows == [" ".join(r).split() for r in md_rows]
