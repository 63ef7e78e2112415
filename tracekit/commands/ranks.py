"""Shared by the analyze and report services: choosing several traces of a dataset and comparing them
across ranks (tracekit/analysis/ranks/compare.py), one task per trace. See docs/scale.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.commands.output import Lines, Progress
from tracekit.errors import UsageError
from tracekit.parallel import plan
from tracekit.tables.layout import dataset_trace_ids, is_dataset


def selection(source: str, trace_id: str | None, rank: str | None, compare: tuple[str, ...] = ()) -> list[str] | None:
    """The dataset's traces chosen by ``--compare`` prefixes and ``--rank`` (all of them when neither);
    None when one trace is meant (a file, ``--trace-id``, a dataset of one) and the usual path
    applies. Several ids mean a comparison across ranks; one id means that trace."""
    several = rank is not None or bool(compare)
    if not is_dataset(source):
        if several:
            raise UsageError(f"{source}: --rank / --compare need an ingested dataset (tracekit ingest)")
        return None
    if trace_id is not None:
        if several:
            raise UsageError("--trace-id picks one trace; --rank / --compare choose several to compare")
        return None
    if not several and len(dataset_trace_ids(source)) <= 1:
        return None
    from tracekit.analysis.ranks.compare import parse_ranks, select_traces  # only to compare: commands/__init__.py

    return select_traces(source, list(compare) or None, parse_ranks(rank))


def compare_traces(
    source: str,
    ids: list[str],
    hardware: str | None,
    phase_map: Any,
    thresholds: str | None,
    workers: int | None,
    scheduler: str | None,
    progress: Progress = Lines(),
    model: str | None = None,
) -> dict[str, Any]:
    """Every chosen trace analysed as a task (``progress`` counts them), then compared: the ranks JSON
    document. Raises UsageError for ``model`` (--model is for one trace)."""
    if model:
        raise UsageError("--model applies to one trace, not to a comparison of ranks (choose one with --trace-id)")
    from tracekit.analysis.ranks.compare import analyze_ranks  # only to compare: commands/__init__.py

    where = plan(len(ids), workers, scheduler)
    with progress(len(ids), "analyze") as bar:
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
