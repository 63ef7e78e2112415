"""Rank, parallel layout and stage from the file names serving engines give their torch.profiler
traces (issue 26 item 7). Pure string parsing; the Kineto loader calls :func:`apply_engine_name`.

vLLM (``get_worker_rank_suffix`` in ``vllm/distributed/utils.py``, the worker's trace name
``[{prefix}_]{suffix}``, written by ``torch.profiler.tensorboard_trace_handler`` as
``{worker_name}.{time_ns}.pt.trace.json[.gz]``)::

    [{prefix}_]dp{d}_pp{p}_tp{t}_dcp{c}_ep{e}_rank{r}.{time_ns}.pt.trace.json[.gz]
    [{prefix}_]rank{r}.{time_ns}.pt.trace.json[.gz]        (parallel state not initialised)

d, p, t, c, e are the worker's rank *within* each group (data, pipeline, tensor, decode-context,
expert parallel) and r its global rank; the group sizes are not in the name.

SGLang (``_ProfilerTorch.stop`` in ``sglang/srt/utils/profile_utils.py``; the scheduler's older
``{time}-TP-{t}.trace.json.gz``)::

    [{prefix}-]{profile_id}-TP-{t}[-DP-{d}][-PP-{p}][-EP-{e}][-{stage}].trace.json.gz

t, d, p, e are ranks within the groups; DP/PP/EP appear only when that group has more than one
rank (older releases never write them). The stage suffix is written when profiling by stage:
``prefill`` / ``decode`` (``EXTEND`` / ``DECODE``, the forward mode's name, in other releases;
any case is read). ``{prefix}-{profile_id}`` is shared by the files of one profiling run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

# ASCII digits only (re.ASCII): a full-width digit is no rank.
_TS: Final = r"\.(?P<ts>\d+)\.pt\.trace\.json(?:\.gz)?$"
VLLM_RE: Final = re.compile(
    r"^(?:(?P<prefix>.*)_)?dp(?P<dp>\d+)_pp(?P<pp>\d+)_tp(?P<tp>\d+)(?:_dcp(?P<dcp>\d+))?_ep(?P<ep>\d+)"
    r"_rank(?P<rank>\d+)" + _TS,
    re.ASCII,
)
VLLM_RANK_ONLY_RE: Final = re.compile(r"^(?:(?P<prefix>.*)_)?rank(?P<rank>\d+)" + _TS, re.ASCII)
SGLANG_RE: Final = re.compile(
    r"^(?P<run>.+?)-TP-(?P<tp>\d+)(?:-DP-(?P<dp>\d+))?(?:-PP-(?P<pp>\d+))?(?:-EP-(?P<ep>\d+))?"
    r"(?:-(?P<stage>[A-Za-z]+))?\.trace\.json(?:\.gz)?$",
    re.ASCII,
)
# Ranks and world sizes read: 0 ≤ rank < world size < 2^31; any other is null, counted in a warning.
MAX_WORLD: Final = (1 << 31) - 1
# SGLang's stage words → tracekit's phase names
STAGES: Final = {"prefill": "prefill", "extend": "prefill", "decode": "decode"}
GROUPS: Final = ("dp", "pp", "tp", "dcp", "ep")


@dataclass(frozen=True)
class EngineName:
    """What a file name says. ``ranks``: rank within each parallel group named (dp, pp, tp, dcp,
    ep); ``rank``: the global rank when the name gives it; ``run``: the part shared by the files
    of one run (vLLM's prefix, SGLang's ``[prefix-]profile_id``); ``stage``: prefill / decode."""

    engine: str
    ranks: dict[str, int] = field(default_factory=dict)
    rank: int | None = None
    run: str | None = None
    stage: str | None = None

    def layout(self) -> dict[str, Any]:
        """The ``meta["layout"]`` entry: engine, ``{group}_rank`` per group named, rank, run, stage."""
        out: dict[str, Any] = {"engine": self.engine}
        out.update({f"{g}_rank": self.ranks[g] for g in GROUPS if g in self.ranks})
        out.update({"rank": self.rank, "run": self.run, "stage": self.stage})
        return out


def parse_engine_name(name: str) -> EngineName | None:
    """The engine's reading of a trace file's base name, or None when it follows neither grammar."""
    name = name.rsplit("/", 1)[-1]
    m = VLLM_RE.match(name)
    if m:
        ranks = {g: int(m[g]) for g in GROUPS if m[g] is not None}
        return EngineName("vllm", ranks, int(m["rank"]), m["prefix"] or None)
    m = VLLM_RANK_ONLY_RE.match(name)
    if m:
        return EngineName("vllm", {}, int(m["rank"]), m["prefix"] or None)
    m = SGLANG_RE.match(name)
    if m:
        stage = m["stage"]
        if stage is not None and stage.lower() not in STAGES:
            return None  # a suffix that is not a stage: not SGLang's grammar
        ranks = {g: int(m[g]) for g in ("tp", "dp", "pp", "ep") if m[g] is not None}
        return EngineName("sglang", ranks, None, m["run"], STAGES[stage.lower()] if stage else None)
    return None


def _rank(v: Any, below: int = MAX_WORLD) -> int | None:
    """``v`` when it is an integer in [0, ``below``), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < below else None


def apply_engine_name(meta: dict[str, Any], name: str) -> None:
    """Add ``meta["layout"]`` from the file name and, when the trace carries no rank of its own
    (no ``distributedInfo``), the global rank the name gives (vLLM's ``rank{r}``). Every rank and
    world size (``distributedInfo``'s and the name's) is range-checked first:
    0 ≤ rank < world size < 2^31; another value is null and counted in one warning (a rank beyond
    int64 used to stop the ingest, one in an SGLang name every later analysis)."""
    bad: list[str] = []
    dist = meta.get("distributed") or {}
    if dist:
        world = dist.get("world_size")
        if world is not None and (_rank(world) is None or world == 0):
            bad.append(f"world_size {_short(world)}")
            world = None
        rank = dist.get("rank")
        if rank is not None and _rank(rank, world or MAX_WORLD) is None:
            bad.append(f"rank {_short(rank)}" + (f" of world size {world}" if world else ""))
            rank = None
        meta["distributed"] = {**dist, "rank": rank, "world_size": world}
    parsed = parse_engine_name(name)
    if parsed is not None:
        ranks = {g: r for g, r in parsed.ranks.items() if _rank(r) is not None}
        bad += [f"file name {g} rank {_short(r)}" for g, r in parsed.ranks.items() if g not in ranks]
        rank = _rank(parsed.rank, (meta.get("distributed") or {}).get("world_size") or MAX_WORLD)
        if parsed.rank is not None and rank is None:
            bad.append(f"file name rank {_short(parsed.rank)}")
        parsed = EngineName(parsed.engine, ranks, rank, parsed.run, parsed.stage)
    if bad:
        note = f"{len(bad)} rank value(s) out of range dropped ({', '.join(bad[:4])}; 0 ≤ rank < world size < 2^31)"
        meta["warnings"] = [*(meta.get("warnings") or []), note]
    if parsed is None:
        return
    meta["layout"] = parsed.layout()
    dist = meta.get("distributed") or {}
    if dist.get("rank") is None and parsed.rank is not None:
        meta["distributed"] = {
            "rank": parsed.rank,
            "world_size": dist.get("world_size"),
            "backend": dist.get("backend"),
        }
        meta["layout"]["rank_from"] = "file name"


def _short(v: Any) -> str:
    text = str(v) if isinstance(v, int) and abs(v) < 10**30 else "(too large)" if isinstance(v, int) else repr(v)
    return text[:40]


def engine_runs(names: list[str]) -> list[tuple[str, str, int, dict[str, int]]]:
    """The engine runs among trace file names, sorted by engine and run: ``(engine, run, traces,
    traces per stage)`` for each run an engine's name gives (names without a run are left out);
    stages in the order prefill, decode."""
    runs: dict[tuple[str, str], tuple[int, dict[str, int]]] = {}
    for n in names:
        p = parse_engine_name(n)
        if p is None or p.run is None:
            continue
        count, stages = runs.get((p.engine, p.run), (0, {}))
        if p.stage is not None:
            stages[p.stage] = stages.get(p.stage, 0) + 1
        runs[(p.engine, p.run)] = (count + 1, stages)
    order = {"prefill": 0, "decode": 1}
    return [
        (e, r, c, dict(sorted(s.items(), key=lambda kv: order.get(kv[0], 2))))
        for (e, r), (c, s) in sorted(runs.items())
    ]
