"""``tracekit whatif``: sensitivity and colocated-vs-disaggregated serving from measured costs (docs/whatif.md)."""

from __future__ import annotations

import json

import click

from tracekit.cli.capture import capture_option, model_option
from tracekit.cli.option_values import NON_NEGATIVE, POSITIVE, WORKERS, ArrivalSchedule, Finite
from tracekit.cli.options import (
    force_option,
    format_option,
    hardware_option,
    out_option,
    phase_map_option,
    trace_id_option,
)
from tracekit.cli.outfile import emit
from tracekit.errors import UsageError


@click.command("whatif")
@click.argument("traces", metavar="[TRACE_OR_DATASET]...", nargs=-1)
@click.option("--prefill-workers", type=WORKERS, default=1, show_default=True, help="Prefill workers (disaggregated).")
@click.option("--decode-workers", type=WORKERS, default=1, show_default=True, help="Decode workers (disaggregated).")
@click.option(
    "--link",
    "link_key",
    default="nvlink4",
    show_default=True,
    help="Interconnect from the link table (nvlink3/4/5, pcie4/5, ib-hdr/ndr).",
)
@click.option(
    "--link-gbps", type=POSITIVE, default=None, help="Link bandwidth in GB/s per direction (instead of --link)."
)
@click.option(
    "--link-efficiency",
    type=Finite(0.0, 1.0, low_open=True),
    default=1.0,
    show_default=True,
    help="Share of the peak link bandwidth reached.",
)
@click.option(
    "--link-latency-us", type=NON_NEGATIVE, default=0.0, show_default=True, help="Fixed cost per KV transfer, µs."
)
@click.option(
    "--kv-bytes-per-token",
    type=NON_NEGATIVE,
    default=None,
    help="KV-cache bytes per token (default: from the trace's shapes).",
)
@click.option("--slo", default=None, help="ttft=MS,tpot=MS,e2el=MS for goodput.")
@click.option(
    "--arrival",
    type=ArrivalSchedule(),
    default=None,
    help="Replay the traced requests at another load with the trace's scheduler settings and predict "
    "TTFT / TPOT / E2E percentiles (docs/whatif.md).",
)
@click.option(
    "--seed",
    type=click.IntRange(0),
    default=None,
    help="Seed of --arrival poisson:R's draws when the trace's own schedule was not poisson (default: the trace's).",
)
@click.option(
    "--prefill-ms",
    type=NON_NEGATIVE,
    default=None,
    help="Hand input: prefill time of one request (with --tpot-ms, --decode-steps; with a trace, "
    "replaces the trace's).",
)
@click.option("--tpot-ms", type=NON_NEGATIVE, default=None, help="Hand input: time per output token.")
@click.option(
    "--decode-steps",
    type=click.IntRange(0),
    default=None,
    help="Hand input: decode steps (output tokens produced by decode).",
)
@hardware_option()
@phase_map_option()
@capture_option
@format_option(["text", "json"], default="text")
@trace_id_option()
@out_option("Write here instead of stdout.")
@force_option()
@model_option
def whatif(
    traces: tuple[str, ...],
    prefill_workers: int,
    decode_workers: int,
    link_key: str,
    link_gbps: float | None,
    link_efficiency: float,
    link_latency_us: float,
    kv_bytes_per_token: float | None,
    slo: str | None,
    prefill_ms: float | None,
    tpot_ms: float | None,
    decode_steps: int | None,
    arrival: str | None,
    seed: int | None,
    hardware: str | None,
    phase_map: tuple[str, ...],
    captures: tuple[str, ...],
    fmt: str,
    trace_id: str | None,
    out: str | None,
    force: bool,
    model: str | None,
) -> None:
    """What halving prefill or TPOT saves, colocated vs disaggregated serving of the traced load, and
    (--arrival) the traced workload at another load. Several traces (e.g. a prefill trace and a
    decode trace of one model): the sensitivity takes each input from the first that has it."""
    from tracekit.report.output import check_out
    from tracekit.report.screens.whatif import render

    out_path = check_out(out, force) if out else None
    from tracekit.whatif.run import run_whatif

    hand = (prefill_ms, tpot_ms, decode_steps)
    if not traces and None in hand:
        raise UsageError("give a TRACE_OR_DATASET, or all of --prefill-ms, --tpot-ms and --decode-steps")
    results = []
    if traces:
        from tracekit.analysis.serving.latency import Slo
        from tracekit.labels.phases import parse_phase_map
        from tracekit.report.from_path import analyse_path

        Slo.parse(slo)  # a bad --slo or --phase-map fails before the (slow) analysis
        pm = parse_phase_map(phase_map) or None
        for t in traces:
            a = analyse_path(
                t, hardware=hardware, phase_map=pm, slo=slo, trace_id=trace_id, captures=list(captures), model=model
            )
            results.append((t, a.result))
    doc = run_whatif(
        traces[0] if traces else None,
        results[0][1] if results else None,
        hand=hand if any(v is not None for v in hand) else None,
        prefill_workers=prefill_workers,
        decode_workers=decode_workers,
        link_key=link_key,
        link_gbps=link_gbps,
        link_efficiency=link_efficiency,
        link_latency_us=link_latency_us,
        kv_bytes_per_token=kv_bytes_per_token,
        slo=slo,
        arrival=arrival,
        seed=seed,
        others=results[1:],
    )
    emit(json.dumps(doc, indent=2) + "\n" if fmt == "json" else render(doc), out_path, fmt)
