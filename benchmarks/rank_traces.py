"""Rank traces built from one real Kineto trace: the shape of a tensor-/data-parallel profile.

    .venv/bin/python benchmarks/rank_traces.py --ranks 8 --copies 3 --slow-rank 5 --slow-step 7 --out /tmp/ranks8

Rank r's trace is the source trace (``--copies`` times back to back, like later iterations, each
``ProfilerStep#N`` renumbered) with every timestamp shifted by r × ``--skew-us`` (clock skew)
and ``distributedInfo`` saying rank r of R. On ``--slow-rank``, the ``--slow-step``-th
ProfilerStep (0-based, time order) is slowed: time inside its CPU range [a, b] is dilated by
``--factor`` and everything after it is pushed back by (b − a)(factor − 1)::

    t' = t                          t <= a
    t' = a + (t − a) · factor       a < t <= b
    t' = t + (b − a) · (factor − 1) t > b

so that step's window (CPU start to the later of CPU end and last kernel end) grows by exactly
(b − a)(factor − 1), its kernels run ``factor`` times longer, and every other step keeps its
length. Used by benchmarks/ranks.py and tests/test_dask_ranks.py. Outputs stay out of the repo.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

ID_STEP = 10_000_000
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
DEFAULT_SRC = (
    Path(__file__).resolve().parents[2] / "shared/traces/kineto/hta/df_index_resolver/df_index_resolver.json.gz"
)


def _loads(raw: bytes) -> Any:
    try:
        import orjson

        return orjson.loads(raw)
    except ImportError:
        return json.loads(raw)


def _dumps(obj: Any) -> bytes:
    try:
        import orjson

        return orjson.dumps(obj)
    except ImportError:
        return json.dumps(obj, separators=(",", ":")).encode()


def replicate(doc: dict[str, Any], copies: int) -> tuple[list[dict[str, Any]], list[tuple[float, float]]]:
    """The source's events ``copies`` times in a row (ids offset, ProfilerStep#N renumbered) and the
    (start, end) µs of every ProfilerStep in time order."""
    events: list[dict[str, Any]] = doc["traceEvents"]
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    span = float(max(ts) - min(ts)) + 1000.0
    steps = [int(m.group(1)) for e in events if (m := STEP_RE.match(str(e.get("name", ""))))]
    nsteps = (max(steps) - min(steps) + 1) if steps else 0
    out: list[dict[str, Any]] = []
    for c in range(copies):
        for e in events:
            if c == 0:
                out.append(e)
                continue
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
                e["ts"] = e["ts"] + c * span
            if isinstance(e.get("id"), int):
                e["id"] += c * ID_STEP
            if isinstance(e.get("args"), dict):
                args = dict(e["args"])
                for key in ("correlation", "External id"):
                    if isinstance(args.get(key), int):
                        args[key] += c * ID_STEP
                e["args"] = args
            m = STEP_RE.match(str(e.get("name", "")))
            if m:
                e["name"] = f"ProfilerStep#{int(m.group(1)) + c * nsteps}"
            out.append(e)
    windows = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in out
        if STEP_RE.match(str(e.get("name", ""))) and e.get("ph") == "X"
    )
    return out, windows


def _warp(a: float, b: float, factor: float) -> Any:
    def f(t: float) -> float:
        if t <= a:
            return t
        if t <= b:
            return a + (t - a) * factor
        return t + (b - a) * (factor - 1)

    return f


def write_rank(
    doc: dict[str, Any],
    events: list[dict[str, Any]],
    path: Path,
    rank: int,
    world: int,
    shift_us: float,
    slow: tuple[float, float] | None,
    factor: float,
) -> None:
    warp = _warp(slow[0], slow[1], factor) if slow else None
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    head["distributedInfo"] = {**(doc.get("distributedInfo") or {}), "rank": rank, "world_size": world}
    tmp = path.with_name(path.name + ".part")
    with gzip.open(tmp, "wb", compresslevel=1) as fh:
        fh.write(b"{")
        for k, v in head.items():
            fh.write(_dumps(k) + b":" + _dumps(v) + b",\n")
        fh.write(b'"traceEvents":[\n')
        for i, e in enumerate(events):
            if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
                e = dict(e)
                t0 = float(e["ts"])
                if warp is not None:
                    t1 = t0 + float(e.get("dur", 0) or 0)
                    t0 = warp(t0)
                    if "dur" in e:
                        e["dur"] = warp(t1) - t0
                e["ts"] = t0 + shift_us
            fh.write((b",\n" if i else b"") + _dumps(e))
        fh.write(b"\n]}\n")
    tmp.replace(path)


def make_rank_traces(
    src: Path,
    out: Path,
    ranks: int,
    slow_rank: int,
    slow_step: int,
    factor: float = 1.5,
    copies: int = 1,
    skew_us: float = 37.0,
) -> dict[str, Any]:
    """Write ``rank-00.json.gz`` … into ``out``; returns what was slowed: rank, step, its window
    (µs) and the expected extra step time in ns (``(b − a)(factor − 1)``)."""
    raw = src.read_bytes()
    doc = _loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events, windows = replicate(doc, copies)
    if not 0 <= slow_step < len(windows):
        raise SystemExit(f"--slow-step {slow_step}: the trace has {len(windows)} ProfilerSteps")
    a, b = windows[slow_step]
    out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        write_rank(
            doc,
            events,
            out / f"rank-{r:02d}.json.gz",
            r,
            ranks,
            r * skew_us,
            (a, b) if r == slow_rank else None,
            factor,
        )
    return {
        "slow_rank": slow_rank,
        "slow_step": slow_step,
        "window_us": [a, b],
        "factor": factor,
        "extra_ns": (b - a) * (factor - 1) * 1000,
        "steps": len(windows),
        "ranks": ranks,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--slow-rank", type=int, default=5)
    ap.add_argument("--slow-step", type=int, default=2)
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    info = make_rank_traces(a.src, a.out, a.ranks, a.slow_rank, a.slow_step, a.factor, a.copies)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
