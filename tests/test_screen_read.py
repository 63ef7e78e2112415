"""The ``analyze`` screen reads the analysis document with only the region fields it shows (issue
36: 250,000 region rows decoded whole were ≈ 2.7 GB of Python objects), and prints what the whole
document prints (tracekit/report/screens/analyze.py ``read``, ``read_parts``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import EVIL, sample_doc  # noqa: E402

from tracekit.analysis.contract import rows  # noqa: E402
from tracekit.commands.analyze import AnalyzeRequest, analyze  # noqa: E402
from tracekit.commands.ingest import IngestRequest, ingest  # noqa: E402
from tracekit.report.screens.analyze import Region, read, read_parts, render  # noqa: E402

CULPRIT = {"rank": 1, "cause": "launch_latency", "call": "cudaLaunchKernel", "op": "aten::mm", "idle_ns": 5_000_000}


def doc_with_unread_fields() -> dict[str, Any]:
    """The sample document, each region with fields the screen does not read (its top kernels and
    ops, CPU times), the region with most idle time (EVIL, 17.5 ms) with an idle culprit."""
    doc = sample_doc()
    for i, r in enumerate(doc["regions"]):
        r["top_kernels"] = [{"rank": 1, "name": f"gemm_{i}", "device_time_ns": 1000 * i}]
        r["top_ops"] = [{"rank": 1, "name": "aten::mm", "shape": "[[4096,4096]]"}]
        r["cpu_start_ns"], r["region_id"] = 10 * i, i
        r["idle_culprits"] = [{**CULPRIT, "share": 0.25, "count": 7}] if r["name"] == EVIL else []
    return doc


def test_the_screen_reads_only_its_region_fields_and_prints_the_same() -> None:
    doc = doc_with_unread_fields()
    whole = msgspec.json.encode(doc)
    read_doc = read(whole)
    evil = next(r for r in read_doc["regions"] if r["name"] == EVIL)
    assert isinstance(evil, Region)
    # the fields it holds: those of the row the screen reads; the culprits kept as their JSON
    assert evil.keys() == ["name", "phase", "step", "busy_ns", "span_ns", "gap_count", "kernel_count"] + [
        "flops",
        "bytes",
        "intensity",
        "achieved_flops_per_s",
        "achieved_bytes_per_s",
        "coverage",
        "bound",
        "reason",
        "idle_ns",
        "idle_culprits",
    ]
    assert isinstance(evil.idle_culprits, msgspec.Raw) and evil["idle_culprits"] == [
        {**CULPRIT, "share": 0.25, "count": 7}
    ]
    assert evil.get("device_time_ns") is None and "device_time_ns" not in evil and evil["idle_ns"] == 17_500_000
    with pytest.raises(KeyError, match="top_kernels"):  # a field the screen would read undeclared: loud
        evil.get("top_kernels")
    # the same document in the parts the analysis writes (regions in arrays, one of them empty)
    token = "tracekit:regions:t"
    skeleton = msgspec.json.encode({**doc, "regions": token})
    arrays = [msgspec.json.encode(doc["regions"][:2]), b"[]", msgspec.json.encode(doc["regions"][2:])]
    from_parts = read_parts(skeleton, iter(arrays))
    assert list(from_parts) == list(doc)  # the document's keys in order
    for markdown in (False, True):
        for regions in (40, 2, -1):
            expected = render(json.loads(whole), markdown=markdown, regions=regions)
            assert render(read_doc, markdown=markdown, regions=regions) == expected
            assert render(from_parts, markdown=markdown, regions=regions) == expected
    # the culprit read for the region with most idle time: 5 ms of its 17.5 ms idle, launch latency
    text = render(read_doc)
    row = next(line for line in text.splitlines() if line.startswith("region <script>") and "cudaLaunchKernel" in line)
    assert row.split()[2:] == ["17.5", "ms", "1", "(c)", "launch", "latency", "cudaLaunchKernel", "aten::mm"] + [
        "5",
        "ms",
        "25",
        "%",
        "7",
    ]


def test_the_first_screen_of_a_dataset_stores_the_document_it_reads(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nccl_data trace's 42 regions in arrays of 5 (the last of 2): the first text analysis of
    the dataset reads them as they are stored, and stores what ``--format json`` prints; the second
    prints the same screen from the stored document, as does an analysis not stored."""
    monkeypatch.setattr(rows, "ROW_CHUNK", 5)
    nccl, ds = str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz"), str(tmp_path / "ds")
    assert ingest(IngestRequest((nccl,), Path(ds))).error is None
    first = analyze(AnalyzeRequest(ds, regions=-1)).body
    assert isinstance(first, str) and "Regions (42, most device time first)" in first
    assert len(list((tmp_path / "ds" / "analysis_results").rglob("*.json"))) == 1
    pieces = analyze(AnalyzeRequest(ds, fmt="json")).body  # the stored document, read as printed
    assert not isinstance(pieces, (str, bytes))
    stored = b"".join(pieces)
    assert len(json.loads(stored)["regions"]) == 42
    assert stored == b"".join(analyze(AnalyzeRequest(ds, fmt="json", reuse=False)).body)  # type: ignore[arg-type]
    assert (
        analyze(AnalyzeRequest(ds, regions=-1)).body
        == first
        == analyze(AnalyzeRequest(ds, regions=-1, reuse=False)).body
    )
