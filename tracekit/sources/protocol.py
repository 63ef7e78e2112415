"""What a trace format is to tracekit: the :class:`Source` protocol.

Adding a format is one module that implements it (``sources/<format>/source.py``) and one line in
:data:`tracekit.sources.registry.SOURCES`. The registry asks each source in turn whether it reads a
file (``sniff``, from the file's first bytes: never its name alone), then loads it (``load``) or
ingests it (``ingest``). The format's name, written into every trace's ``meta["format"]``, is the
source's ``name``: listed once, in its own package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace

HEAD_BYTES = 64  # what sniff is given of a file's start


@dataclass(frozen=True)
class Capabilities:
    """What a format records, for the analyses and renderers to ask instead of its name."""

    # CPU-side ops are recorded beside device activity unless the profiler was told not to: a
    # trace with kernels and no op was recorded without the CPU activity (the hint says how to).
    cpu_ops_with_device: bool = False
    # op shapes come from annotations that carry them (NVTX ranges with PyProf-style arguments),
    # so a trace without shapes needs other annotations, not other profiler options
    shapes_from_annotations: bool = False
    # `tracekit label` can write the labels back into a file of this format
    writes_labels: bool = False


UNKNOWN = Capabilities()  # a format no source registers (an old or foreign dataset): claim nothing


class Source(Protocol):
    """One trace format."""

    name: str  # the format name (meta["format"], docs/schema.md)
    capabilities: Capabilities  # what its traces record
    suffixes: tuple[str, ...]  # file names a folder given to `tracekit ingest` is searched for

    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether this source reads ``path``, from its first :data:`HEAD_BYTES` bytes ``head``
        (never empty). May raise a one-line TracekitError for a file it recognises and refuses
        (e.g. a report that must be exported first)."""
        ...

    def load(self, path: Path, trace_id: str | None) -> Trace:
        """The trace's canonical tables."""
        ...

    def streamed(self, path: Path, stream: bool | None) -> bool:
        """Whether :meth:`ingest` of ``path`` reads it streamed, in bounded memory (the command
        then chooses polars' allocator for it). ``stream``: the user's --stream / --no-stream."""
        ...

    def ingest(
        self, path: Path, out: Path, stream: bool | None, captures: list[Path]
    ) -> tuple[dict[str, Any], dict[str, int]] | None:
        """Write the trace straight into the dataset ``out`` (its own bounded-memory writer) and
        return (meta, rows per table); None: the source has no writer of its own for this file,
        and the trace is loaded and written with its derived tables (tracekit/ingest.py)."""
        ...


GZIP_MAGIC = b"\x1f\x8b"


def looks_textual(head: bytes) -> bool:
    """Whether a file's first bytes are UTF-8 text without NUL (a cut multi-byte char at the end
    still counts as text)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        try:
            head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return b"\x00" not in head
