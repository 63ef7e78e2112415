"""The ``whatif`` service: sensitivity and colocated-vs-disaggregated serving from measured costs (docs/whatif.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracekit.analysis.serving.latency import Slo
from tracekit.commands.output import Output, output
from tracekit.analysis.contract.rows import clean
from tracekit.errors import UsageError
from tracekit.labels.phases import parse_phase_map
from tracekit.report.from_path import analyse_request
from tracekit.report.output import check_out
from tracekit.report.screens.whatif import render
from tracekit.whatif.run import run_whatif


@dataclass(frozen=True)
class WhatifRequest:
    """``tracekit whatif``'s options (the field names are the click parameters'); ``prefill_ms``,
    ``tpot_ms`` and ``decode_steps`` are the hand input."""

    traces: tuple[str, ...] = ()
    prefill_workers: int = 1
    decode_workers: int = 1
    link_key: str = "nvlink4"
    link_gbps: float | None = None
    link_efficiency: float = 1.0
    link_latency_us: float = 0.0
    kv_bytes_per_token: float | None = None
    slo: str | None = None
    prefill_ms: float | None = None
    tpot_ms: float | None = None
    decode_steps: int | None = None
    arrival: str | None = None
    seed: int | None = None
    hardware: str | None = None
    phase_map: tuple[str, ...] = ()
    captures: tuple[str, ...] = ()
    fmt: str = "text"
    trace_id: str | None = None
    out: str | None = None
    force: bool = False
    model: str | None = None
    parallel: str | None = None
    map: str | None = None


def whatif(req: WhatifRequest) -> Output:
    """The what-if document of the traces (each analysed) and the hand input, as text or JSON.
    Raises UsageError (no input, bad options), AnalysisError (nothing can be answered)."""
    out = check_out(req.out, req.force, inputs=req.traces) if req.out else None
    hand = (req.prefill_ms, req.tpot_ms, req.decode_steps)
    if not req.traces and None in hand:
        raise UsageError("give a TRACE_OR_DATASET, or all of --prefill-ms, --tpot-ms and --decode-steps")
    results = _analysed(req)
    knobs = ("prefill_workers", "decode_workers", "link_key", "link_gbps", "link_efficiency", "link_latency_us")
    doc = run_whatif(
        req.traces[0] if req.traces else None,
        results[0][1] if results else None,
        hand=hand if any(v is not None for v in hand) else None,
        **{k: getattr(req, k) for k in (*knobs, "kv_bytes_per_token", "slo", "arrival", "seed")},
        others=results[1:],
    )
    body = json.dumps(clean(doc), indent=2, allow_nan=False) + "\n" if req.fmt == "json" else render(doc)
    return output(body, req.fmt, out)


def _analysed(req: WhatifRequest) -> list[tuple[str, Any]]:
    """(trace, analysis result) of each trace given; a bad --slo or --phase-map fails before the (slow) analysis."""
    if not req.traces:
        return []
    Slo.parse(req.slo)
    pm = parse_phase_map(req.phase_map) or None
    return [(t, analyse_request(req, t, phase_map=pm).result) for t in req.traces]
