"""Jobs, not piles: the traces of a dataset grouped into jobs before any comparison across ranks.

A dataset may hold unrelated runs (an H100 trace, an MI300X trace, an Nsight export ...). Only the
traces of one job are ranks of each other; comparing the others gives meaningless stragglers. Two
traces are in the same job when their **key** is equal (see docs/scale.md, "Jobs"):

- ``format`` (kineto / nsys): one job is profiled by one tool;
- ``device``: the device name the trace's meta records (ranks of one job run on one kind of device);
- ``world_size`` and ``backend`` (``distributedInfo``): ranks of one job share them;
- ``steps``: the step structure — the distinct (phase, step name) pairs with digit runs written
  ``N`` (ranks run the same steps; ``ProfilerStep#5`` and ``ProfilerStep#6`` are the same step
  kind), else the distinct outermost region names (digits likewise); ``-`` when neither;
- ``family``: the file name with its extensions removed and the rank number written ``{r}`` (the
  last digit run equal to the recorded rank; when no rank is recorded, the last digit run after a
  separator ``-_.`` or a rank word — rank, tp, pp, dp, gpu, worker — and before a separator or the
  end): ``rank-03.json.gz`` → ``rank-{r}``, ``llama-TP-3`` → ``llama-TP-{r}``, ``h100_run`` stays;
- ``run`` and ``stage``: what an engine's file name says (tracekit/sources/engine_names.py): the
  part its files of one profiling run share (vLLM's prefix, SGLang's ``[prefix-]profile_id``) and
  SGLang's per-stage suffix (prefill / decode).

A trace without a recorded rank takes its rank from the engine's file name when the name gives a
single group (SGLang ``…-TP-3``: rank 3). The per-stage files of one SGLang run — ``…-TP-{t}-EXTEND``
and ``…-TP-{t}-DECODE`` — are different jobs (a prefill stage is not a rank of the decode stage)
and are **paired**: each job's row names the jobs of the same run at the other stages.

A trace whose world size is recorded but whose rank is not (one out of range, dropped on reading:
rank 3 of world size 2) is a job of its own. Within a group of equal keys, ranks of one job are
distinct: when a recorded rank repeats (two
runs of the same job ingested together), the n-th trace of each rank goes to the n-th job, the
traces of a rank taken in the order of their folder, then their start (the earliest region), then
their id. The trace id alone (a content hash) used to decide: each job held ranks of both runs,
and a straggler of 1.2–1.5× was made up.
Pure functions on small frames; the pieces come from tracekit/analysis/ranks/per_trace.py.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

import polars as pl

from tracekit.analysis.ranks.per_trace import RankPieces
from tracekit.numbers import count

KEY_COLUMNS = ("format", "device", "world_size", "backend", "steps", "family", "run", "stage")
KEY_SCHEMA = {
    "trace_id": pl.String(),
    "rank": pl.Int64(),
    "format": pl.String(),
    "device": pl.String(),
    "world_size": pl.Int64(),
    "backend": pl.String(),
    "steps": pl.String(),
    "family": pl.String(),
    "run": pl.String(),
    "stage": pl.String(),
    "folder": pl.String(),  # which of a repeated rank's traces goes to which job (not in the key)
    "start_ns": pl.Int64(),
}
EXTENSIONS = (".gz", ".zst", ".json", ".sqlite", ".trace", ".pt", ".nsys-rep", ".pftrace")
MAX_STEP_KINDS = 12  # a step structure names at most this many step kinds (sorted; the rest are dropped)
_DIGITS = re.compile(r"\d+")
# a rank-like number when no rank is recorded: after a separator or a rank word, before a separator or the end
_RANK_LIKE = re.compile(r"(?i)(?:^|(?<=[-_.])|(?<=rank)|(?<=tp)|(?<=pp)|(?<=dp)|(?<=gpu)|(?<=worker))\d+(?=$|[-_.])")


def step_kinds(names: list[str]) -> str:
    """The distinct names with every digit run written ``N``, sorted, joined by ``; ``; ``-`` when none."""
    kinds = sorted({_DIGITS.sub("N", n) for n in names if n})
    return "; ".join(kinds[:MAX_STEP_KINDS]) or "-"


def family(source: str, rank: int | None) -> str:
    """The file name of ``source`` without its extensions, its rank number written ``{r}``."""
    name = PurePath(source).name
    while True:
        low = name.lower()
        ext = next((e for e in EXTENSIONS if low.endswith(e) and len(name) > len(e)), None)
        if ext is None:
            break
        name = name[: -len(ext)]
    if rank is not None:
        runs = [m for m in _DIGITS.finditer(name) if int(m.group()) == rank]
    else:
        runs = list(_RANK_LIKE.finditer(name))
    if not runs:
        return name
    m = runs[-1]
    return name[: m.start()] + "{r}" + name[m.end() :]


def job_keys(pieces: list[RankPieces]) -> pl.DataFrame:
    """One row per trace: its id, recorded rank and the key columns (:data:`KEY_COLUMNS`)."""
    rows = []
    for p in pieces:
        m = p.meta_key
        names = [f"{ph or '-'}:{n}" for n, ph in p.steps.select("name", "phase").iter_rows()] if p.steps.height else []
        groups = m.get("group_ranks") or {}
        rank = p.rank if p.rank is not None else (next(iter(groups.values())) if len(groups) == 1 else None)
        rows.append(
            {
                "trace_id": p.trace_id,
                "rank": rank,
                "format": m.get("format"),
                "device": m.get("device") or p.device,
                "world_size": m.get("world_size"),
                "backend": m.get("backend"),
                "steps": step_kinds(names) if names else step_kinds(list(m.get("top_regions") or [])),
                "family": family(p.source, rank),
                "run": m.get("run"),
                "stage": m.get("stage"),
                "folder": str(PurePath(p.source).parent),
                "start_ns": m.get("start_ns"),
            }
        )
    return pl.DataFrame(rows, schema=KEY_SCHEMA)


def group_jobs(keys: pl.DataFrame) -> pl.DataFrame:
    """``keys`` with ``job`` (1, 2, … in order of each job's first trace id) and ``traces`` (the
    job's trace count): equal key columns, then distinct recorded ranks (the n-th trace of a
    repeated rank, by folder, start and id, goes to the n-th job of that key)."""
    order = [c for c in ("folder", "start_ns") if c in keys.columns]
    k = keys.sort([*order, "trace_id"], nulls_last=True).with_columns(
        pl.int_range(pl.len()).over([*KEY_COLUMNS, "rank"]).alias("_nth"),
    )
    # a trace whose world size is known but whose rank is not (dropped as out of range: rank 3 of
    # world size 2) is no rank of a job: alone
    alone = pl.when(pl.col("rank").is_null() & pl.col("world_size").is_not_null()).then(pl.col("trace_id"))
    k = k.with_columns(
        pl.struct(*KEY_COLUMNS, "_nth", alone.alias("_alone")).rank("dense").alias("_g"),
    )
    first = k.group_by("_g").agg(pl.col("trace_id").min().alias("_first")).sort("_first")
    ids = first.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).alias("job")).select("_g", "job")
    return (
        k.join(ids, on="_g")
        .with_columns(pl.len().over("job").cast(pl.Int64()).alias("traces"))
        .drop("_g", "_nth", *order)
        .sort("job", "trace_id")
    )


def describe(grouped: pl.DataFrame) -> list[dict[str, Any]]:
    """The jobs as JSON rows: ``id``, ``traces`` (ids), ``ranks`` (recorded, or null), ``key`` (the
    shared key columns), ``compared`` (≥ 2 traces: compared as ranks) and ``why`` (in words)."""
    out: list[dict[str, Any]] = []
    stages = (
        grouped.filter(pl.col("run").is_not_null() & pl.col("stage").is_not_null())
        .group_by("job")
        .agg(pl.col("run").first(), pl.col("stage").first())
    )
    for (job,), g in grouped.group_by("job", maintain_order=True):
        first = g.row(0, named=True)
        key = {c: first[c] for c in KEY_COLUMNS}
        n = g.height
        why = (
            "same " + ", ".join(_key_words(key))
            if n > 1
            else f"alone: world size {key['world_size']} but no rank in it (out of range, see the warnings)"
            if first["rank"] is None and key["world_size"] is not None
            else "alone: no other trace shares its " + ", ".join(KEY_COLUMNS)
        )
        paired = (
            stages.filter((pl.col("run") == key["run"]) & (pl.col("stage") != key["stage"]) & (pl.col("job") != job))
            .sort("job")
            .select("job", "stage")
            .rows()
            if key["run"] is not None and key["stage"] is not None
            else []
        )
        out.append(
            {
                "id": int(job),
                "traces": g["trace_id"].to_list(),
                "ranks": g["rank"].to_list(),
                "key": key,
                "compared": n > 1,
                "why": why,
                "paired": [{"job": int(j), "stage": st} for j, st in paired],
            }
        )
    return out


def _key_words(key: dict[str, Any]) -> list[str]:
    words = {"world_size": "world size", "family": "file name"}
    out = []
    for c in KEY_COLUMNS:
        if key[c] in (None, "", "-"):
            continue
        kinds = len(str(key[c]).split("; "))
        out.append(f"steps ({count(kinds, 'step kind')})" if c == "steps" else f"{words.get(c, c)} {key[c]}")
    return out
