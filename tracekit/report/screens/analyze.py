"""The ``tracekit analyze`` screen: the analysis JSON document (docs/json.md) as the screen's
sections of the section registry (tracekit/report/sections/registry.py), under a title and lead
lines, rendered as plain text or Markdown by the same document renderers the report uses
(:func:`tracekit.report.formats.text.render_document`,
:func:`tracekit.report.formats.markdown.render_document`).

The document is read by :func:`read` (a whole document, as stored) or :func:`read_parts` (the parts
the analysis writes, tracekit/analysis/result.py ``to_json_parts``): the same document, but each
region row holds only the fields the screen reads (:class:`Region`), never a dict of every field
with its top kernels and ops: 250,000 regions decoded whole were ≈ 2.7 GB of Python objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from tracekit.report import fmt
from tracekit.report.formats.markdown import render_document as markdown_document
from tracekit.report.formats.text import render_document as text_document
from tracekit.report.sections.blocks import Document
from tracekit.report.sections.registry import SECTIONS, Entry, sections

if TYPE_CHECKING:  # the analysis package imports polars; the stored-result screen must not
    from tracekit.analysis.contract.types import AnalysisDoc


class Region(msgspec.Struct, gc=False):
    """A region row of the document as the screen reads it: a read-only mapping of the fields
    below that the row holds (a field absent from the row is absent here too). Reading a field the
    class does not declare raises KeyError: a section that reads one more field of the region rows
    adds it here, and no screen prints a region field as missing that the document holds. The
    idle culprits (read for the few regions with most idle time) are kept as their JSON and
    decoded when read."""

    name: Any = msgspec.UNSET
    phase: Any = msgspec.UNSET
    step: Any = msgspec.UNSET
    device_time_ns: Any = msgspec.UNSET
    busy_ns: Any = msgspec.UNSET
    span_ns: Any = msgspec.UNSET
    busy_ratio: Any = msgspec.UNSET
    gap_count: Any = msgspec.UNSET
    kernel_count: Any = msgspec.UNSET
    flops: Any = msgspec.UNSET
    bytes: Any = msgspec.UNSET
    intensity: Any = msgspec.UNSET
    achieved_flops_per_s: Any = msgspec.UNSET
    achieved_bytes_per_s: Any = msgspec.UNSET
    coverage: Any = msgspec.UNSET
    bound: Any = msgspec.UNSET
    reason: Any = msgspec.UNSET
    above_roof: Any = msgspec.UNSET
    frac_peak_flops: Any = msgspec.UNSET
    frac_peak_bytes: Any = msgspec.UNSET
    idle_ns: Any = msgspec.UNSET
    idle_culprits: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET

    def get(self, key: str, default: Any = None) -> Any:
        if key not in _FIELDS:
            raise KeyError(f"the analyze screen reads region field {key!r}: declare it in screens/analyze.py Region")
        v = getattr(self, key)
        if v is msgspec.UNSET:
            return default
        return msgspec.json.decode(v) if isinstance(v, msgspec.Raw) else v

    def __getitem__(self, key: str) -> Any:
        v = self.get(key, msgspec.UNSET)
        if v is msgspec.UNSET:
            raise KeyError(key)
        return v

    def __contains__(self, key: object) -> bool:
        return self.get(str(key), msgspec.UNSET) is not msgspec.UNSET

    def keys(self) -> list[str]:
        return [f for f in self.__struct_fields__ if getattr(self, f) is not msgspec.UNSET]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())


_FIELDS = frozenset(Region.__struct_fields__)
Mapping.register(Region)
_REGIONS = msgspec.json.Decoder(list[Region])


def region_rows(rows_json: bytes | msgspec.Raw) -> list[Region]:
    """A JSON array of region rows as the screen reads them; nothing of ``rows_json`` kept."""
    rows = _REGIONS.decode(rows_json)
    for r in rows:
        if isinstance(r.idle_culprits, msgspec.Raw):
            r.idle_culprits = r.idle_culprits.copy()  # not a view holding all of rows_json
    return rows


def read(doc_json: bytes) -> AnalysisDoc:
    """The analysis document (compact or indented JSON) as the screen reads it: its region rows
    :class:`Region` s, everything else as decoded."""
    top = msgspec.json.decode(doc_json, type=dict[str, msgspec.Raw])
    doc: Any = {k: region_rows(v) if k == "regions" else msgspec.json.decode(v) for k, v in top.items()}
    return doc  # type: ignore[no-any-return]


def read_parts(skeleton: bytes, arrays: Iterable[bytes]) -> AnalysisDoc:
    """:func:`read` of a compact document in parts (tracekit/analysis/result.py ``to_json_parts``):
    ``skeleton`` without its region rows, ``arrays`` the JSON arrays of them in order, each read as
    it comes."""
    doc: Any = msgspec.json.decode(skeleton)
    doc["regions"] = [r for arr in arrays for r in region_rows(arr)]
    return doc  # type: ignore[no-any-return]


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
