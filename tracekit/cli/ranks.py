"""Shared by ``tracekit analyze`` and ``tracekit report``: choosing several traces of a dataset and
comparing them across ranks (tracekit/analysis/ranks/compare.py) with a progress bar. See docs/scale.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.errors import UsageError
from tracekit.tables.layout import dataset_trace_ids, is_dataset

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


def selection(source: str, trace_id: str | None, rank: str | None, compare: tuple[str, ...] = ()) -> list[str] | None:
    """The dataset's traces chosen by ``--compare`` prefixes and ``--rank`` (all of them when neither);
    None when one trace is meant (a file, ``--trace-id``, a dataset of one) and the usual path
    applies. Several ids mean a comparison across ranks; one id means that trace."""
    several = rank is not None or bool(compare)
    if not is_dataset(source):  # told without importing polars
        if several:
            raise UsageError(f"{source}: --rank / --compare need an ingested dataset (tracekit ingest)")
        return None
    if trace_id is not None:
        if several:
            raise UsageError("--trace-id picks one trace; --rank / --compare choose several to compare")
        return None
    if not several and len(dataset_trace_ids(source)) <= 1:
        return None
    from tracekit.analysis.ranks.compare import parse_ranks, select_traces

    return select_traces(source, list(compare) or None, parse_ranks(rank))


def compare_traces(
    source: str,
    ids: list[str],
    hardware: str | None,
    phase_map: Any,
    thresholds: str | None,
    workers: int | None,
    scheduler: str | None,
) -> dict[str, Any]:
    """Every chosen trace analysed as a task, then compared: the ranks JSON document."""
    from tracekit.analysis.ranks.compare import analyze_ranks
    from tracekit.cli.progress import Progress
    from tracekit.parallel import plan

    where = plan(len(ids), workers, scheduler)
    with Progress(len(ids), "analyze") as bar:
        result = analyze_ranks(
            source,
            ids,
            where,
            hardware=hardware,
            phase_map=phase_map,
            thresholds=thresholds,
            on_done=lambda o: bar.update(1),
        )
    doc = result.to_json()
    doc["dataset"] = str(Path(source))
    doc["ran_on"] = where.describe()
    return doc
