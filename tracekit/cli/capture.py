"""The ``--capture TRACE`` option shared by ingest, analyze, report, diff and label."""

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
