"""The trace formats tracekit reads, registered in one place (tracekit/sources/protocol.py).

To add a format: write ``sources/<format>/source.py`` implementing :class:`Source` and add it to
:data:`SOURCES`. Order matters only where two sources could claim one file: each is asked in turn.
An ingested dataset (a folder) is not a source: it is read back by tracekit/tables/trace.py.
"""

from __future__ import annotations

from tracekit.errors import UsageError
from tracekit.sources.kineto.source import KinetoSource
from tracekit.sources.nsys.source import NsysSource
from tracekit.sources.protocol import UNKNOWN, Capabilities, Source

SOURCES: tuple[Source, ...] = (NsysSource(), KinetoSource())
DATASET = "dataset"  # the format name of an ingested dataset (a folder)
FORMATS = (*(s.name for s in SOURCES), DATASET)


def source(name: str) -> Source:
    """The registered source of the format ``name``."""
    for s in SOURCES:
        if s.name == name:
            return s
    raise UsageError(f"no trace format named {name!r} (formats: {', '.join(FORMATS)})")


def suffixes() -> tuple[str, ...]:
    """Every file-name ending a registered source reads (for folders given to ingest)."""
    return tuple(dict.fromkeys(x for s in SOURCES for x in s.suffixes))


def capabilities(name: object) -> Capabilities:
    """What traces of the format ``name`` (a trace's ``meta["format"]``) record; nothing is claimed
    for a name no source registers."""
    return next((s.capabilities for s in SOURCES if s.name == name), UNKNOWN)
