"""The ``--capture TRACE`` option shared by ingest, analyze, report, diff and label, and ``--model
CONFIG.json`` (those and whatif)."""

from __future__ import annotations

import click

capture_option = click.option(
    "--capture",
    "captures",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="TRACE",
    help="Graph-capture trace whose ops the CUDA/HIP graph replays inherit (repeatable); a "
    "capture_traces/ folder beside the trace is used without it.",
)

model_option = click.option(
    "--model",
    "model",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    metavar="CONFIG.json",
    help="The model's Hugging Face config.json: fills what the trace lacks (MoE top-k and expert "
    "size, attention heads, KV bytes per token, weight format); the trace wins where both say.",
)
