"""Nsight Systems SQLite exports (``nsys export --type sqlite``) as a :class:`~tracekit.sources.protocol.Source`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.conventions import TABLES
from tracekit.errors import UnsupportedFormatError
from tracekit.sources.protocol import GZIP_MAGIC, Capabilities

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace

from tracekit.sources.nsys import NAME

SQLITE_MAGIC = b"SQLite format 3\x00"
# .nsys-rep / .qdrep files are not SQLite; they start with a header of their own.
REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


class NsysSource:
    capabilities: Capabilities = Capabilities(shapes_from_annotations=True)
    name: str = NAME
    suffixes: tuple[str, ...] = (".sqlite", ".db")

    def sniff(self, path: Path, head: bytes) -> bool:
        """An SQLite file; a report that must be exported first is refused in one line."""
        if head.startswith(SQLITE_MAGIC):
            return True
        if head.startswith(REPORT_MAGIC) or (path.suffix in REPORT_SUFFIXES and not head.startswith(GZIP_MAGIC)):
            raise UnsupportedFormatError(
                f"{path}: an Nsight Systems report (.nsys-rep), which tracekit cannot read; convert it with "
                f"`nsys export --type sqlite {path.name}` and give tracekit the .sqlite file"
            )
        return False

    def load(self, path: Path, trace_id: str | None) -> Trace:
        from tracekit.sources.nsys.loader import load_nsys

        return load_nsys(path, trace_id=trace_id)

    def streamed(self, path: Path, stream: bool | None) -> bool:
        return False  # its own chunked writer, whatever the size (ingest)

    def ingest(
        self, path: Path, out: Path, stream: bool | None, captures: list[Path]
    ) -> tuple[dict[str, Any], dict[str, int]] | None:
        """Through the chunked writer (never the whole export in memory). Partitions of this trace
        in tables other than those written (e.g. derived tables of an earlier ingest, which might
        describe another row order) are removed by the commit (tracekit/tables/trace.py)."""
        import polars as pl

        from tracekit.sources.nsys.ingest import ingest_nsys
        from tracekit.tables.ids import make_trace_id
        from tracekit.tables.trace import DATA_FILE, META_TABLE

        tid = make_trace_id(path)
        ingest_nsys(path, out, tid)
        meta_file = out / META_TABLE / f"trace_id={tid}" / DATA_FILE
        meta: dict[str, Any] = json.loads(pl.read_parquet(meta_file)["meta_json"][0])
        meta["trace_id"] = tid
        heights = {
            n: pl.scan_parquet(out / n / f"trace_id={tid}" / DATA_FILE).select(pl.len()).collect().item()
            for n in TABLES
        }
        return meta, heights
