"""The ``tracekit analyze`` screen: the analysis JSON document (docs/json.md) as the screen's
sections of the section registry (tracekit/report/sections/registry.py), under a title and lead
lines, rendered as plain text or Markdown by the same document renderers the report uses
(:func:`tracekit.report.formats.text.render_document`,
:func:`tracekit.report.formats.markdown.render_document`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tracekit.report import fmt
from tracekit.report.formats.markdown import render_document as markdown_document
from tracekit.report.formats.text import render_document as text_document
from tracekit.report.sections.blocks import Document
from tracekit.report.sections.registry import SECTIONS, Entry, sections

if TYPE_CHECKING:  # the analysis package imports polars; the stored-result screen must not
    from tracekit.analysis.contract.types import AnalysisDoc


def lead(doc: AnalysisDoc) -> tuple[str, list[str]]:
    """The screen's title and lead lines: the trace, then the device and its peaks."""
    tr, dev = doc["trace"], doc["device"]
    title = f"tracekit analyze: {tr.get('source') or tr.get('id')}"
    lines = [f"format {tr.get('format')}, rank {fmt.value('rank', tr.get('rank'))}, trace id {tr.get('id')}"]
    if dev.get("hardware"):
        ridges = ", ".join(f"{k} {fmt.value('ridge', v)}" for k, v in (dev.get("ridge") or {}).items())
        lines.append(
            f"device {dev.get('name')}: peaks of {dev['hardware']} ({dev.get('peaks_source')}); "
            f"bandwidth {fmt.value('peak_bytes_per_s', dev.get('peak_bytes_per_s'))}; ridge {ridges}"
        )
    else:
        lines.append(f"device {dev.get('name')}: {dev.get('hint')}")
    return title, lines


def render(doc: AnalysisDoc, markdown: bool = False, regions: int = 40, registry: Sequence[Entry] = SECTIONS) -> str:
    """The analysis JSON document as plain text or GitHub Markdown; ``regions``: how many regions
    the regions table lists (most device time first), -1 for all."""
    title, lines = lead(doc)
    secs = sections(Document(doc, regions), "screen", registry)
    return (markdown_document if markdown else text_document)(title, lines, secs, doc.get("diagnostic"))
