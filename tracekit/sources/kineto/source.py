"""Kineto (torch.profiler Chrome trace JSON, plain or gzipped) as a :class:`~tracekit.sources.protocol.Source`."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.errors import NotATraceError
from tracekit.sources.protocol import GZIP_MAGIC, Capabilities, looks_textual

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace

from tracekit.sources.kineto import NAME

STREAM_BYTES = 256 << 20  # Kineto JSON at least this large is ingested streamed, with bounded memory
ARRAY_WINDOW = 1 << 20  # bytes of a JSON array searched for a trace event


class KinetoSource:
    capabilities: Capabilities = Capabilities(cpu_ops_with_device=True, writes_labels=True)
    name: str = NAME
    suffixes: tuple[str, ...] = (".json", ".json.gz", ".gz")

    def sniff(self, path: Path, head: bytes) -> bool:
        """gzip, or JSON text that opens an object or an array of trace events."""
        if head.startswith(GZIP_MAGIC):
            refuse_eventless_array(path, gz=True)
            return True
        if not looks_textual(head):
            return False
        stripped = head.lstrip()
        if stripped[:1] == b"[":
            refuse_eventless_array(path, gz=False)
        return stripped[:1] in (b"{", b"[")

    def load(self, path: Path, trace_id: str | None) -> Trace:
        from tracekit.sources.kineto.loader import load_kineto

        return load_kineto(path, trace_id=trace_id)

    def streamed(self, path: Path, stream: bool | None) -> bool:
        from tracekit.sources.kineto.reading.window import json_size

        return bool(stream) or (stream is None and json_size(path) >= STREAM_BYTES)

    def ingest(
        self, path: Path, out: Path, stream: bool | None, captures: list[Path]
    ) -> tuple[dict[str, Any], dict[str, int]] | None:
        """The streamed ingest for a big file (or --stream); None otherwise (loaded, then written
        with its derived tables). A streamed ingest does not merge capture traces, and says so."""
        if not self.streamed(path, stream):
            return None
        from tracekit.sources.kineto.capture.files import discover
        from tracekit.sources.kineto.ingest import ingest_kineto

        meta, heights = ingest_kineto(path, out)
        if captures or discover(path):
            warning = (
                "streamed: graph-capture traces are not merged into a streamed ingest (pass --no-stream to merge them)"
            )
            meta = {**meta, "warnings": [*(meta.get("warnings") or []), warning]}
        return meta, heights


def refuse_eventless_array(p: Path, gz: bool) -> None:
    """A top-level JSON array is a trace only when its elements are trace events, each with a
    ``"ph"`` field (Chrome trace event format). An array whose first MiB holds no ``"ph"`` key
    (a list of settings such as ``capture_traces/execution_details.json``) is refused here."""
    try:
        with gzip.open(p, "rb") if gz else open(p, "rb") as fh:
            head = fh.read(ARRAY_WINDOW)
    except (OSError, EOFError):
        return  # damaged gzip: the loader reports it
    body = head.lstrip()
    if not body.startswith(b"[") or b'"ph"' in body:
        return
    raise NotATraceError(f'{p}: a JSON array with no trace events (no element has a "ph" field): not a trace')
