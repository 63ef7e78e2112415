"""``tracekit analyze``'s request: its options, shared by the service
(:mod:`tracekit.commands.analyze`) and its heavy half (:mod:`tracekit.commands.analyze_compute`),
which the service imports lazily — one module below both, so they import no cycle."""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.tables.layout import is_dataset


@dataclass(frozen=True)
class AnalyzeRequest:
    """``tracekit analyze``'s options (the field names are the click parameters')."""

    source: str
    hardware: str | None = None
    fmt: str = "text"
    phase_map: tuple[str, ...] = ()
    slo: str | None = None
    thresholds: str | None = None
    trace_id: str | None = None
    rank: str | None = None
    compare: tuple[str, ...] = ()
    workers: int | None = None
    scheduler: str | None = None
    regions: int = 40
    out: str | None = None
    force: bool = False
    reuse: bool = True
    captures: tuple[str, ...] = ()
    model: str | None = None
    parallel: str | None = None
    map: str | None = None

    @property
    def stored(self) -> bool:
        """One trace of a dataset, reuse on: its result may be read from, and stored in, the dataset."""
        one = self.rank is None and not self.compare and not self.captures and not self.model and not self.map
        return self.reuse and one and is_dataset(self.source)
