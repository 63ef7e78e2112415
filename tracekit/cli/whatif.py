"""``tracekit whatif``: sensitivity and colocated-vs-disaggregated serving from measured costs (docs/whatif.md).

Thin: options → :func:`tracekit.commands.whatif.whatif` → printed or written."""

from __future__ import annotations

from typing import Any

import click

from tracekit.cli.option_values import DECODE_STEPS, NON_NEGATIVE, POSITIVE, WORKERS, ArrivalSchedule, Finite
from tracekit.cli.options import (
    capture_option,
    force_option,
    format_option,
    hardware_option,
    map_option,
    model_option,
    parallel_option,
    out_option,
    phase_map_option,
    trace_id_option,
)
from tracekit.cli.outfile import show
from tracekit.commands.whatif import WhatifRequest
from tracekit.commands.whatif import whatif as run_whatif


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
    type=DECODE_STEPS,
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
@parallel_option
@map_option
def whatif(**params: Any) -> None:
    """What halving prefill or TPOT saves, colocated vs disaggregated serving of the traced load, and
    (--arrival) the traced workload at another load. Several traces (e.g. a prefill trace and a
    decode trace of one model): the sensitivity takes each input from the first that has it."""
    show(run_whatif(WhatifRequest(**params)))
