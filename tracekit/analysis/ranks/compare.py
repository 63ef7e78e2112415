"""Analysis across traces (ranks): one analysis per trace as a task, then polars across them.

:func:`rank_pieces` (the task, in tracekit/analysis/ranks/per_trace.py) analyses one trace of a dataset
and keeps what the comparison needs: its per-phase rows, its steps (time, busy, idle, device time
per op class) and its communication per phase (:mod:`tracekit.analysis.communication`). :func:`combine` gives

- ``per_rank``: rank × phase (busy, window, verdict, step count and median step time), plus a
  ``trace`` row per rank for the whole trace;
- ``stragglers``: per step (k-th step of every rank, in time order) the slowest rank, max and
  median step time across ranks, and what made the slow rank slow: the step's phase, the op class
  with the most device time above the other ranks' median, and the idle time above theirs;
- ``comm``: communication time per rank and phase and its exposed part;
- ``step_time``: rank × step → step time (the heat map).

Only traces of one **job** are compared (tracekit/analysis/ranks/jobs.py): :func:`compare_jobs` groups
the pieces into jobs and runs :func:`combine` on each job of ≥ 2 traces; a trace alone in its job
is listed, never compared as a rank.

Steps are the analysis' phase units (its ``steps`` frame); a trace without phase units (e.g. a
training trace) uses its ``ProfilerStep#N`` regions. A step's time is its window: from the earlier
of its CPU start and first kernel to the later of its CPU end and last kernel. See docs/scale.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.analysis.communication import COMM_SCHEMA
from tracekit.analysis.ranks.jobs import describe, group_jobs, job_keys
from tracekit.analysis.ranks.per_trace import IDLE_SCHEMA, PHASE_SCHEMA, STEP_SCHEMA, RankPieces, RankTask, rank_pieces
from tracekit.errors import UsageError
from tracekit.tables.trace import META_TABLE
from tracekit.tables.trace import dataset_trace_ids
from tracekit.tables.trace import scan_table
from tracekit.errors import AnalysisError
from tracekit.parallel import plan
from tracekit.parallel import run_tasks
from tracekit.analysis.contract.rows import clean

STRAGGLER_RATIO = 1.1  # a step is a straggler step when its slowest rank takes ≥ 1.1 × the median


def rank_numbers(pieces: list[RankPieces]) -> list[int]:
    """Each trace's rank: its recorded ``distributed.rank`` when every trace has one and they
    differ; else its position among the traces (sorted by trace id)."""
    recorded = [p.rank for p in pieces]
    if all(r is not None for r in recorded) and len(set(recorded)) == len(recorded):
        return [int(r) for r in recorded if r is not None]
    order = sorted(range(len(pieces)), key=lambda i: pieces[i].trace_id)
    position = {i: pos for pos, i in enumerate(order)}
    return [position[i] for i in range(len(pieces))]


@dataclass(frozen=True)
class RanksResult:
    """What :func:`combine` returns (frames documented in the module docstring and docs/scale.md)."""

    traces: pl.DataFrame
    per_rank: pl.DataFrame
    stragglers: pl.DataFrame
    comm: pl.DataFrame
    step_time: pl.DataFrame
    failed: list[dict[str, str]] = field(default_factory=list)
    ranks_from: str = "meta"

    def to_json(self) -> dict[str, Any]:

        worst = self.stragglers.sort("ratio", descending=True, nulls_last=True).head(1).to_dicts()
        return clean(
            {
                "version": 1,
                "kind": "ranks",
                "ranks_from": self.ranks_from,
                "traces": self.traces.to_dicts(),
                "per_rank": self.per_rank.to_dicts(),
                "stragglers": self.stragglers.to_dicts(),
                "worst_step": worst[0] if worst else None,
                "communication": self.comm.to_dicts(),
                "step_time": self.step_time.to_dicts(),
                "failed": self.failed,
            }
        )


@dataclass(frozen=True)
class JobsResult:
    """What :func:`compare_jobs` returns: the jobs (``describe``'s rows), one :class:`RanksResult`
    per job of ≥ 2 traces, the trace rows of every trace (with its job) and the failed traces."""

    jobs: list[dict[str, Any]]
    comparisons: list[tuple[int, RanksResult]]
    traces: pl.DataFrame
    failed: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """One job holding every trace: that job's ranks document plus ``jobs``. Otherwise the
        ``jobs``, every trace with its job, and ``comparisons`` (one ranks document per job of
        ≥ 2 traces, with its ``job`` id); nothing compared across jobs."""

        if len(self.jobs) == 1 and len(self.comparisons) == 1:
            return {**self.comparisons[0][1].to_json(), "jobs": clean(self.jobs), "failed": self.failed}
        return clean(
            {
                "version": 1,
                "kind": "ranks",
                "jobs": self.jobs,
                "traces": self.traces.to_dicts(),
                "comparisons": [{"job": j, **r.to_json()} for j, r in self.comparisons],
                "failed": self.failed,
            }
        )


def compare_jobs(pieces: list[RankPieces], failed: list[dict[str, str]] | None = None) -> JobsResult:
    """Group the pieces into jobs (tracekit/analysis/ranks/jobs.py) and :func:`combine` each job of
    ≥ 2 traces; a trace alone in its job is listed only."""
    grouped = group_jobs(job_keys(pieces))
    by_id = {p.trace_id: p for p in pieces}
    jobs = describe(grouped)
    comparisons = [(j["id"], combine([by_id[t] for t in j["traces"]])) for j in jobs if j["compared"]]
    traces = grouped.join(
        pl.DataFrame(
            {"trace_id": [p.trace_id for p in pieces], "source": [p.source for p in pieces]},
            schema={"trace_id": pl.String(), "source": pl.String()},
        ),
        on="trace_id",
    ).select("job", "trace_id", "rank", "device", "source")
    return JobsResult(jobs, comparisons, traces, list(failed or []))


def combine(pieces: list[RankPieces]) -> RanksResult:
    """The cross-rank frames from every trace's pieces (pure polars)."""
    ranks = rank_numbers(pieces)
    from_meta = all(p.rank is not None for p in pieces) and ranks == [p.rank for p in pieces]
    traces = pl.DataFrame(
        {
            "rank": ranks,
            "trace_id": [p.trace_id for p in pieces],
            "source": [p.source for p in pieces],
            "device": [p.device for p in pieces],
        },
        schema={"rank": pl.Int64(), "trace_id": pl.String(), "source": pl.String(), "device": pl.String()},
    ).sort("rank")

    def tag(frames: list[pl.DataFrame], schema: dict[str, Any]) -> pl.DataFrame:
        parts = [f.with_columns(pl.lit(r, dtype=pl.Int64()).alias("rank")) for f, r in zip(frames, ranks)]
        return (
            pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema={"rank": pl.Int64(), **schema})
        )

    steps = tag([p.steps for p in pieces], STEP_SCHEMA)
    phases = tag([p.phases for p in pieces], PHASE_SCHEMA)
    stats = (pl.len().cast(pl.Int64()).alias("step_count"), pl.col("step_ns").median().alias("step_median_ns"))
    step_stats = steps.group_by("rank", "phase").agg(*stats)
    all_steps = steps.group_by("rank").agg(*stats).with_columns(pl.lit("trace").alias("phase"))
    per_rank = (
        phases.join(pl.concat([step_stats, all_steps.select(step_stats.columns)]), on=["rank", "phase"], how="left")
        .with_columns(pl.col("step_count").fill_null(0))
        .sort("rank", pl.col("phase") != "trace", "phase")
        .select(
            "rank",
            "phase",
            "region_count",
            "span_ns",
            "busy_ns",
            "busy_ratio",
            "step_count",
            "step_median_ns",
            "bound",
            "reason",
        )
    )
    comm = (
        tag([p.comm for p in pieces], COMM_SCHEMA)
        .select("rank", *COMM_SCHEMA)
        .sort("rank", pl.col("phase") != "trace", "phase")
    )
    classes = tag(
        [p.step_classes for p in pieces], {"step": pl.Int64(), "op_class": pl.String(), "device_time_ns": pl.Int64()}
    )
    idle = tag([p.step_idle for p in pieces], IDLE_SCHEMA)
    return RanksResult(
        traces,
        per_rank,
        stragglers(steps, classes, idle),
        comm,
        steps.select("rank", "step", "name", "phase", "step_ns").sort("rank", "step"),
        ranks_from="meta" if from_meta else "trace order",
    )


STRAGGLER_SCHEMA = {
    "step": pl.Int64(),
    "ranks": pl.Int64(),
    "slowest_rank": pl.Int64(),
    "max_ns": pl.Int64(),
    "median_ns": pl.Float64(),
    "ratio": pl.Float64(),
    "straggler": pl.Boolean(),
    "name": pl.String(),
    "phase": pl.String(),
    "excess_ns": pl.Float64(),
    "op_class": pl.String(),
    "op_class_excess_ns": pl.Float64(),
    "idle_ns": pl.Int64(),
    "idle_excess_ns": pl.Float64(),
    "idle_cause": pl.String(),
    "idle_cause_excess_ns": pl.Float64(),
    "idle_top": pl.String(),
}


def stragglers(steps: pl.DataFrame, classes: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
    """Per step: ranks, slowest rank, max / median step time, and what made the slow rank slow:
    its step's phase, the op class and the idle cause with the largest excess over the other
    ranks' median, its idle excess, and its step's top idle culprit in words (``idle_top``)."""
    if steps.height == 0:
        return pl.DataFrame(schema=STRAGGLER_SCHEMA)
    s = steps.sort("step", "step_ns", "rank", descending=[False, True, False])
    top = s.group_by("step", maintain_order=True).agg(
        pl.len().cast(pl.Int64()).alias("ranks"),
        pl.col("rank").first().alias("slowest_rank"),
        pl.col("step_ns").first().alias("max_ns"),
        pl.col("step_ns").median().alias("median_ns"),
        pl.col("name").first(),
        pl.col("phase").first(),
        pl.col("idle_ns").first(),
        pl.col("idle_top").first(),
        pl.col("idle_ns").slice(1).median().alias("_idle_others"),
    )
    top = top.with_columns(
        (pl.col("max_ns") / pl.col("median_ns")).alias("ratio"),
        (pl.col("max_ns") - pl.col("median_ns")).alias("excess_ns"),
        (pl.col("idle_ns") - pl.col("_idle_others")).alias("idle_excess_ns"),
    )
    top = top.with_columns((pl.col("ratio") >= STRAGGLER_RATIO).fill_null(False).alias("straggler"))
    ex = _largest_excess(classes, top, "op_class", "device_time_ns")
    ix = _largest_excess(idle, top, "cause", "idle_ns").rename(
        {"cause": "idle_cause", "cause_excess_ns": "idle_cause_excess_ns"}
    )
    several = pl.col("ranks") > 1
    return (
        top.join(ex, on="step", how="left")
        .join(ix, on="step", how="left")
        .sort("step")
        .with_columns(
            pl.when(several).then(pl.col(c)).alias(c)
            for c in ("op_class", "op_class_excess_ns", "idle_cause", "idle_cause_excess_ns")
        )
        .select(list(STRAGGLER_SCHEMA))
    )


def _largest_excess(values: pl.DataFrame, top: pl.DataFrame, key: str, value: str) -> pl.DataFrame:
    """Per step, the ``key`` (op class, idle cause) whose ``value`` on the slowest rank exceeds the
    median over the other ranks by most (a key absent on a rank counts 0): ``step, key, key_excess_ns``."""
    out = f"{key}_excess_ns"
    v = values.join(top.select("step", "slowest_rank", "ranks"), on="step")
    slow = v.filter(pl.col("rank") == pl.col("slowest_rank")).select("step", key, pl.col(value).alias("_slow"))
    others = v.filter(pl.col("rank") != pl.col("slowest_rank"))
    n_others = top.select("step", (pl.col("ranks") - 1).alias("_n"))
    med = (
        others.group_by("step", key)
        .agg(pl.col(value).alias("_v"))
        .join(n_others, on="step")
        .with_columns(
            pl.col("_v")
            .list.concat(pl.lit(0, dtype=pl.Int64()).repeat_by(pl.col("_n") - pl.col("_v").list.len()))
            .list.median()
            .alias("_med")
        )
    )
    return (
        slow.join(med.select("step", key, "_med"), on=["step", key], how="left")
        .with_columns((pl.col("_slow") - pl.col("_med").fill_null(0)).cast(pl.Float64()).alias(out))
        .sort("step", out, descending=[False, True])
        .group_by("step", maintain_order=True)
        .first()
        .select("step", key, out)
    )


def select_traces(
    dataset: str | os.PathLike[str], trace_ids: list[str] | None = None, ranks: list[int] | None = None
) -> list[str]:
    """Trace ids of the dataset chosen by id prefixes and/or recorded ranks (all when neither)."""

    ids = dataset_trace_ids(dataset)
    if trace_ids:
        ids = [i for i in ids if any(i == p or i.startswith(p) for p in trace_ids)]
    if ranks is not None:
        meta = scan_table(dataset, META_TABLE).select("trace_id", "rank").collect()
        keep = set(meta.filter(pl.col("rank").is_in(ranks))["trace_id"].to_list())
        ids = [i for i in ids if i in keep]
    if not ids:
        raise UsageError(f"{Path(dataset)}: no trace matches the selection (--trace-id / --rank)")
    return ids


def parse_ranks(text: str | None) -> list[int] | None:
    """``"0,2,4-7"`` → [0, 2, 4, 5, 6, 7]; None stays None. Raises UsageError."""

    if not text:
        return None
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    except ValueError:
        raise UsageError(f"--rank {text!r}: expected a list like 0,2,4-7") from None
    return out


def analyze_ranks(
    dataset: str | os.PathLike[str],
    trace_ids: list[str],
    where: Any = None,
    hardware: str | None = None,
    phase_map: Any = None,
    thresholds: str | None = None,
    on_done: Any = None,
) -> JobsResult:
    """One :func:`rank_pieces` task per trace (``where``: a :class:`tracekit.parallel.Plan`;
    default by trace count), then :func:`compare_jobs` (ranks compared within each job). A trace whose
    analysis fails is listed in ``failed`` with its reason; the others are compared."""

    root = str(Path(dataset).resolve())
    tasks = [RankTask(root, t, hardware, phase_map, thresholds) for t in trace_ids]
    outcomes = run_tasks(rank_pieces, tasks, where or plan(len(tasks)), on_done=on_done, label="analyze")
    pieces = [o.value for o in outcomes if o.value is not None]
    failed = [{"trace_id": trace_ids[o.index], "error": o.error or "failed"} for o in outcomes if o.value is None]
    if not pieces:
        raise AnalysisError(
            f"{dataset}: no trace could be analysed ({failed[0]['error'] if failed else 'none selected'})"
        )
    return compare_jobs(pieces, failed)
