"""``whatif --arrival``: the traced workload replayed at another load (docs/whatif.md, "Another load").

The traced requests (their prompt and output lengths, in their order) arrive on a new schedule
and are served by one worker with the trace's scheduler settings (token budget, max sequences,
chunk) and its fitted step cost; the simulation (:mod:`tracekit.whatif.sim`) gives TTFT, TPOT and
E2E per request and their p50 / p90 / p99.

- ``poisson:R``: when the trace's own schedule was ``poisson:R0`` (the runner's sidecar), the
  traced arrival offsets × R0 / R — the same exponential draws at rate R, which is exactly what
  ``tracekit run serve --arrival poisson:R`` with the trace's seed draws (one generator: gaps =
  −ln(1 − u) / R); otherwise exponential gaps of mean 1 / R drawn with ``random.Random(seed)``.
- ``interval:MS``: request i arrives at i × MS.  ``burst``: every request at 0.

The same replay of the *traced* arrivals is printed beside it with the measured figures: its
error there is the model's own error at the load it was fitted on.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from tracekit.errors import UsageError
from tracekit.numbers import plain
from tracekit.whatif.sim import REPLICATES, SimRequest, metrics, simulate
from tracekit.whatif import percentile, summarise


# Arrival rates and gaps a schedule may have: a rate of 1e-320 req/s made every gap infinite and
# the simulated times NaN (written to the JSON with exit 0).
MIN_RATE = 1e-6
MAX_RATE = 1e9
MAX_GAP_MS = 1e12


@dataclass(frozen=True)
class Arrival:
    """An arrival schedule: ``kind`` poisson (``value`` req/s), interval (``value`` ms) or burst."""

    kind: str
    value: float | None = None

    @classmethod
    def parse(cls, text: str) -> Arrival:
        """``poisson:R`` (R > 0 req/s), ``interval:MS`` (MS ≥ 0), ``burst``; UsageError otherwise."""
        kind, sep, rest = text.strip().partition(":")
        kind = kind.lower()
        if kind == "burst" and not rest:
            return cls("burst")
        if kind in ("poisson", "interval") and sep:
            try:
                v = float(rest)
            except ValueError:
                v = math.nan
            lo, hi = (MIN_RATE, MAX_RATE) if kind == "poisson" else (0.0, MAX_GAP_MS)
            if lo <= v <= hi:  # NaN is not
                return cls(kind, v)
            need = f"a rate from {lo:g} to {hi:g} req/s" if kind == "poisson" else f"a gap from 0 to {hi:g} ms"
            raise UsageError(f"--arrival {text!r}: {kind} needs {need}")
        raise UsageError(f"--arrival {text!r}: give poisson:<req/s>, interval:<ms> or burst")

    def __str__(self) -> str:
        return self.kind if self.value is None else f"{self.kind}:{self.value:g}"


def arrival_times(
    arr: Arrival, traced: list[SimRequest], traced_schedule: str | None, seed: int
) -> tuple[list[float], str]:
    """New arrival times (ms, in the order of ``traced``) and where they come from."""
    n = len(traced)
    if arr.kind == "burst":
        return [0.0] * n, "burst: every request at 0"
    if arr.kind == "interval":
        assert arr.value is not None
        return [i * arr.value for i in range(n)], f"interval: request i at i × {plain(arr.value)} ms"
    assert arr.value is not None
    rate = arr.value
    try:
        old = Arrival.parse(traced_schedule) if traced_schedule else None
    except UsageError:
        old = None
    if old is not None and old.kind == "poisson" and old.value is not None:
        t0 = min(r.arrival_ms for r in traced)
        k = old.value / rate
        return [(r.arrival_ms - t0) * k for r in traced], (
            f"the traced arrivals (poisson:{old.value:g}) × {old.value:g} / {rate:g}: the same exponential draws "
            f"at {rate:g} req/s (what `tracekit run serve --arrival poisson:{rate:g}` draws with the trace's seed)"
        )
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate) * 1e3
    return out, f"exponential gaps at {rate:g} req/s, drawn with seed {seed} (the trace's schedule is not poisson)"


def predict(
    reqs: list[SimRequest], arrivals: list[float], inp: Any, slo: dict[str, float | None] | None
) -> dict[str, Any]:
    """The summary (:func:`tracekit.whatif.summarise`) of ``reqs`` served at ``arrivals``. With the
    fit's noise, :data:`REPLICATES` seeded replays: each figure is their median, and ``interval``
    holds each percentile's 10th–90th percentile over them (the spread the traced steps' noise
    gives the prediction); without it, the one exact replay."""
    seen: list[tuple[int, int]] = []
    if not inp.cost.noise:
        return summarise(replay(reqs, arrivals, inp, seen=seen), slo) | {"steps_run": _composition(seen)}
    runs = [
        summarise(replay(reqs, arrivals, inp, seed, seen if seed == 0 else None), slo) for seed in range(REPLICATES)
    ]
    out = dict(runs[0])
    out["steps_run"] = _composition(seen)
    out["interval"] = {}
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        out[key], out["interval"][key] = {}, {}
        for q in runs[0][key]:
            vals = [r[key][q] for r in runs if r[key][q] is not None]
            out[key][q] = percentile(vals, 0.5)
            out["interval"][key][q] = [percentile(vals, 0.1), percentile(vals, 0.9)] if vals else None
    for key in ("goodput_req_per_s", "goodput_fraction"):
        vals = [r[key] for r in runs if r.get(key) is not None]
        if vals:
            out[key] = percentile(vals, 0.5)
    out["replicates"] = REPLICATES
    return out


def _composition(seen: list[tuple[int, int]]) -> dict[str, Any]:
    """The simulated steps' count and their largest prefill tokens and decoding sequences (the
    replay of seed 0), and the share of steps at each D, to compare with the fit's ranges."""
    d = [x for _, x in seen]
    return {
        "steps": len(seen),
        "max_prefill_tokens": max((p for p, _ in seen), default=0),
        "max_decode_seqs": max(d, default=0),
        "decode_seqs": {str(k): d.count(k) for k in sorted(set(d))},
    }


def replay(
    reqs: list[SimRequest],
    arrivals: list[float],
    inp: Any,
    seed: int | None = None,
    seen: list[tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """Per-request metrics of ``reqs`` arriving at ``arrivals`` (ms) on one worker with ``inp``'s
    step cost and policy (:class:`tracekit.whatif.Inputs`); ``seed``: draw the host's noise;
    ``seen``: receives each step's (P, D)."""
    moved = [SimRequest(r.id, a, r.prompt, r.output) for r, a in zip(reqs, arrivals)]
    rows = metrics(simulate(moved, inp.cost, inp.policy, 1, seed=seed, seen=seen))
    for r, a in zip(rows, arrivals):  # the simulation returns them in the order given
        r["_arrival"], r["_finish"] = a, a + r["e2el_ms"]
    return rows


def measured(result: Any) -> dict[str, Any]:
    """The traced requests' TTFT / TPOT / E2E p50 / p90 / p99 (trace-derived, linear percentiles)."""

    req = getattr(result, "requests", None)
    if req is None or req.height == 0:
        return {}
    rows = req.filter(req["source"] == "trace").select("ttft_ms", "tpot_ms", "e2el_ms").to_dicts()
    return summarise(rows, None) if rows else {}


def errors(pred: dict[str, Any], meas: dict[str, Any]) -> dict[str, float | None]:
    """(predicted − measured) / measured of each p50 / p90 / p99 both have."""
    out: dict[str, float | None] = {}
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        for q in ("p50", "p90", "p99"):
            a, b = (pred.get(key) or {}).get(q), (meas.get(key) or {}).get(q)
            out[f"{key[:-3]}_{q}"] = (a - b) / b if a is not None and b else None
    return out
