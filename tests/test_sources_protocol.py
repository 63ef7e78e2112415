"""Adding a trace format is one class implementing tracekit.sources.protocol.Source plus one
registration (tracekit/sources/registry.py): a made-up format here — a text file ``KERNELS`` then
one device kernel per line, ``name,start_us,dur_us`` — is sniffed by content, loaded, analysed and
ingested with nothing else changed. And every registered source is asked, by content, not name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tracekit.sources import registry
from tracekit.sources.protocol import Capabilities
from tracekit.tables import schema
from tracekit.tables.trace import Trace

MAGIC = b"KERNELS\n"


class KernelLines:
    """The made-up format's whole source: what a new format module holds."""

    name: str = "kernel-lines"
    suffixes: tuple[str, ...] = (".klines",)
    capabilities: Capabilities = Capabilities()  # records kernels alone: claims nothing

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.startswith(MAGIC)

    def load(self, path: Path, trace_id: str | None) -> Trace:
        rows = [line.split(",") for line in path.read_text().splitlines()[1:] if line]
        kernels = pl.DataFrame(
            {
                "kind": ["kernel"] * len(rows),
                "name": [r[0] for r in rows],
                "device": [0] * len(rows),
                "stream": [7] * len(rows),
                "start_ns": [int(r[1]) * 1000 for r in rows],
                "end_ns": [(int(r[1]) + int(r[2])) * 1000 for r in rows],
            }
        )
        tid = trace_id or path.stem
        return Trace(
            schema.conform(kernels, "kernels", tid),
            schema.conform(schema.empty("launches"), "launches", tid),
            schema.conform(schema.empty("ops"), "ops", tid),
            schema.conform(schema.empty("regions"), "regions", tid),
            {"trace_id": tid, "source": str(path), "format": self.name, "devices": [], "warnings": []},
        )

    def streamed(self, path: Path, stream: bool | None) -> bool:
        return False

    def ingest(self, path: Path, out: Path, stream: bool | None, captures: list[Path]) -> Any:
        return None  # no writer of its own: loaded, then written with its derived tables


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> KernelLines:
    src = KernelLines()
    monkeypatch.setattr(registry, "SOURCES", (*registry.SOURCES, src))
    monkeypatch.setattr(tracekit.sources, "SOURCES", registry.SOURCES)
    return src


@pytest.fixture
def klines(tmp_path: Path) -> Path:
    # two kernels on one stream: 0–10 µs and 30–35 µs → busy 15 µs, one gap of 20 µs
    p = tmp_path / "run.klines"
    p.write_bytes(MAGIC + b"gemm_a,0,10\nsoftmax_b,30,5\n")
    return p


def test_a_new_format_is_one_class_and_one_registration(registered: KernelLines, klines: Path, tmp_path: Path) -> None:
    assert tracekit.sources.sniff(klines) == "kernel-lines"
    tr = tracekit.load(str(klines))
    assert tr.kernels.height == 2 and tr.meta["format"] == "kernel-lines"
    res = tracekit.analysis.analyze(tr)
    whole = res.totals["trace"]
    assert whole["busy_ns"] == 15_000 and whole["span_ns"] == 35_000  # 10 + 5 µs busy over 0–35 µs
    from tracekit.ingest import ingest_file

    got = ingest_file(klines, tmp_path / "ds")
    assert got.error is None and got.heights["kernels"] == 2
    assert tracekit.load(str(tmp_path / "ds")).kernels.height == 2


def test_unregistered_the_same_file_is_refused(klines: Path) -> None:
    """Content decides: the same bytes without the registration are not JSON nor SQLite."""
    from tracekit.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match="not JSON"):
        tracekit.sources.sniff(klines)


def test_format_names_are_listed_once() -> None:
    """The registry's names are the sources' own; the loaders write the same names into meta."""
    from tracekit.sources.kineto import NAME as KINETO
    from tracekit.sources.nsys import NAME as NSYS

    assert registry.FORMATS == (NSYS, KINETO, "dataset")
    assert registry.source(KINETO).name == KINETO and registry.source(NSYS).suffixes == (".sqlite", ".db")
    assert set(tracekit.sources.TRACE_SUFFIXES) == {".sqlite", ".db", ".json", ".json.gz", ".gz"}
