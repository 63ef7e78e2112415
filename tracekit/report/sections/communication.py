"""Communication (NCCL / RCCL collectives) per phase: time, the part no compute overlaps, the
bytes the trace says they moved and the bandwidth that gives (``totals.communication``,
docs/json.md). One section for the ``analyze`` screen and the report; the ranks view lists the
same cells per rank."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import Document, Section, Table

HEADERS = ["phase", "collectives", "time", "exposed", "exposed %", "moved", "bandwidth", "bus bandwidth"]
TITLE = (
    "Communication (NCCL/RCCL kernels; exposed = no compute on the device meanwhile; "
    "moved = input messages the kernels or their ops give; bandwidth, bus bandwidth = nccl-tests' algbw, busbw)"
)


def cells(c: Mapping[str, Any]) -> list[str]:
    """One communication row (:class:`~tracekit.analysis.contract.types.CommRow`) as the cells of :data:`HEADERS`."""
    return [
        str(c["phase"]),
        fmt.count(c["comm_count"]),
        fmt.value("comm_ns", c["comm_ns"]),
        fmt.value("exposed_ns", c["exposed_ns"]),
        fmt.percent(c.get("exposed_fraction"), 0),
        fmt.value("comm_bytes", c.get("comm_bytes")),
        fmt.value("algbw_bytes_per_s", c.get("algbw_bytes_per_s")),
        fmt.value("algbw_bytes_per_s", c.get("busbw_bytes_per_s")),
    ]


def communication(d: Document) -> Section | None:
    """The communication rows of ``totals.communication``; none without collectives."""
    rows = d.doc["totals"].get("communication") or []
    return Section(TITLE, tables=[Table(HEADERS, [cells(c) for c in rows])], anchor="communication") if rows else None
