"""The options shared by ``tracekit analyze`` and ``tracekit report`` to choose several traces of a
dataset and compare them across ranks (tracekit/commands/ranks.py). See docs/scale.md."""

from __future__ import annotations

from typing import Any

import click

OPTIONS = [
    click.option(
        "--rank",
        "rank",
        default=None,
        metavar="0,2,4-7",
        help="Traces of a dataset with these recorded ranks (compared across ranks when several).",
    ),
    click.option(
        "--compare",
        "compare",
        multiple=True,
        metavar="ID_PREFIX",
        help="Traces of a dataset whose id starts with this (repeatable), compared across ranks. "
        "A dataset of several traces is compared whole without it; either way the traces are grouped "
        "into jobs and ranks are compared only within a job (docs/scale.md).",
    ),
    click.option(
        "--workers",
        type=int,
        default=None,
        help="Dask LocalCluster workers for the per-trace analyses (default: one per core; 1 = serial).",
    ),
    click.option(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="Run the per-trace analyses on this Dask cluster (default: $DASK_SCHEDULER_ADDRESS).",
    ),
]


def ranks_options(f: Any) -> Any:
    for opt in reversed(OPTIONS):
        f = opt(f)
    return f
