"""The one registry of sections: every section of one trace's analysis, in the order it is shown,
each tagged with the outputs it appears in. ``tracekit analyze`` renders :func:`sections` of
``"screen"`` (text or Markdown), ``tracekit report`` those of ``"report"`` (Markdown or HTML),
through the same renderers (tracekit/report/formats/).

A new section is one builder — a function of a :class:`~tracekit.report.sections.blocks.Document`
that returns a Section, a list of them, or None when it has nothing to show — and one line in
:data:`SECTIONS`. Tag it :data:`BOTH` unless it is meant for one output: a builder for both reads
only the analysis document (``Document.doc``); one for the report alone may read its frames.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tracekit.report.sections import build, communication, features, headline, layers, memory, scopes, serving
from tracekit.report.sections import speculative, why
from tracekit.report.sections.blocks import Document, Section

if TYPE_CHECKING:
    from tracekit.report.model import ReportData

Output = Literal["screen", "report"]
SCREEN: frozenset[Output] = frozenset({"screen"})
REPORT: frozenset[Output] = frozenset({"report"})
BOTH: frozenset[Output] = SCREEN | REPORT
Builder = Callable[[Document], "Section | list[Section] | None"]


@dataclass(frozen=True)
class Entry:
    """One section: its name, its builder, and the outputs it appears in."""

    name: str
    build: Builder
    outputs: frozenset[Output]


SECTIONS: tuple[Entry, ...] = (
    Entry("summary", headline.summary, REPORT),
    Entry("environment", build.environment, REPORT),
    Entry("whole trace", scopes.whole_trace, SCREEN),
    Entry("phases", scopes.phases, SCREEN),
    Entry("phases", build.phases, REPORT),  # the report's phases: time and work tables, latency columns
    Entry("latency", scopes.latency, SCREEN),
    Entry("serving", serving.serving, BOTH),
    Entry("why", why.why, BOTH),
    Entry("features", features.features, BOTH),
    Entry("speculative", speculative.speculative, BOTH),
    Entry("regions", scopes.regions, SCREEN),
    Entry("regions", build.regions, REPORT),  # every column of the region rows, sized to the output
    Entry("communication", communication.communication, BOTH),
    Entry("layers", layers.layers, BOTH),
    Entry("memory", memory.memory, BOTH),
    Entry("top", build.top, REPORT),
    Entry("attribution", scopes.attribution, SCREEN),
    Entry("unattributed", build.unattributed, REPORT),
    Entry("coverage", build.coverage, REPORT),
)


def sections(d: Document, output: Output, registry: Sequence[Entry] = SECTIONS) -> list[Section]:
    """The sections of ``output`` in ``registry`` order; a section with no paragraph and no table is left out."""
    out: list[Section] = []
    for e in registry:
        if output in e.outputs:
            got = e.build(d)
            out += [s for s in (got if isinstance(got, list) else [got] if got else []) if s.paragraphs or s.tables]
    return out


def report_sections(data: ReportData, registry: Sequence[Entry] = SECTIONS) -> list[Section]:
    """The report's sections of the report model ``data`` (its analysis document and its frames)."""
    return sections(Document(data.doc, frames=data), "report", registry)
