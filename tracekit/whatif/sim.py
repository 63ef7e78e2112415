"""A small discrete-event simulation of LLM serving (docs/whatif.md, "The simulation").

Workers run continuous batching with the policy of ``tracekit run serve`` (workloads/scheduler.py):
each step decodes one token for every running sequence whose prompt is done, then spends the rest
of the token budget on prompt chunks (≤ ``chunk`` per request; sequences already admitted first,
then new ones while one of ``max_seqs`` slots is free). A step's duration comes from the measured
step-cost model ``c0 + cp·P + cd·D + ck·K`` (P prefill tokens, D decoding sequences, K = D × the
longest of their contexts, as the fit reads it from ``decode_ctx``) plus the loop's gap between
steps. Tokens exist at the end of the step that produced them. A seeded replay multiplies each
step's fitted time by a ratio drawn from the traced steps' measured / fitted ratios (the host's
noise, so a noisy trace predicts with its noise and an interval, docs/whatif.md "The interval").

- **Colocated**: every worker does both; an arriving request goes to the worker with the fewest
  requests (waiting + running), ties to the lowest index.
- **Disaggregated**: prefill workers only prefill (the first token comes from the prefill, as in
  DistServe / vLLM's disaggregated prefill); the finished prompt's KV cache (prompt tokens × KV
  bytes per token) then crosses the link of its prefill worker — one transfer at a time per link,
  FIFO — and joins the decode worker with the fewest requests, which only decodes.

Deterministic: events at the same time are handled in the order they were scheduled; an idle
worker plans its next step after every arrival of that instant (the runner admits every request
that has arrived before it plans a step).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any


REPLICATES = 20  # seeded noisy replays behind each noisy figure (seeds 0..19): the interval's sample


@dataclass(frozen=True)
class StepCost:
    c0: float  # ms per step
    cp: float  # ms per prefill token
    cd: float = 0.0  # ms per decoding sequence
    ck: float = 0.0  # ms per context token read by a decoding sequence
    gap: float = 0.0  # ms of the serving loop between steps (outside the step's annotation)
    # measured / fitted step time, at equal-probability quantiles of the traced steps: the host's
    # noise, drawn per simulated step by a seeded replay (empty: every step exactly as fitted)
    noise: tuple[float, ...] = ()
    # the host's slow drift: the median ratio of runs of consecutive traced steps, one drawn per
    # seeded replay for all its steps (then ``noise`` holds each step's ratio over its run's)
    drift: tuple[float, ...] = ()

    def ms(self, p: int, d: int, k: int, factor: float = 1.0) -> float:
        return max(0.0, self.c0 + self.cp * p + self.cd * d + self.ck * k) * factor + self.gap


@dataclass(frozen=True)
class Policy:
    token_budget: int = 256
    max_seqs: int = 8
    chunk: int = 256


@dataclass(frozen=True)
class SimRequest:
    id: int
    arrival_ms: float
    prompt: int
    output: int


@dataclass
class Seq:
    req: SimRequest
    prefilled: int = 0
    generated: int = 0
    first_ms: float | None = None
    finish_ms: float | None = None
    interference_ms: float = 0.0  # Σ cp·P over the mixed steps that produced its decode tokens
    transfer_ms: float = 0.0  # KV transfer time including waiting for the link

    @property
    def in_decode(self) -> bool:
        return self.prefilled == self.req.prompt and self.generated < self.req.output


@dataclass
class Worker:
    index: int
    prefill: bool = True
    decode: bool = True
    waiting: deque[Seq] = field(default_factory=deque)
    running: list[Seq] = field(default_factory=list)
    busy: bool = False

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    def plan(self, pol: Policy) -> list[tuple[Seq, int, bool]]:
        """Segments (sequence, tokens, is_decode) of the next step."""
        segs: list[tuple[Seq, int, bool]] = []
        budget = pol.token_budget
        if self.decode:
            for s in self.running:
                if s.in_decode:
                    segs.append((s, 1, True))
                    budget -= 1
        for s in self.running:
            if budget <= 0:
                break
            if s.prefilled < s.req.prompt:
                n = min(pol.chunk, budget, s.req.prompt - s.prefilled)
                segs.append((s, n, False))
                budget -= n
        while budget > 0 and self.waiting and len(self.running) < pol.max_seqs:
            s = self.waiting.popleft()
            self.running.append(s)
            if s.prefilled < s.req.prompt:
                n = min(pol.chunk, budget, s.req.prompt - s.prefilled)
                segs.append((s, n, False))
                budget -= n
            elif self.decode:
                segs.append((s, 1, True))
                budget -= 1
        return segs


@dataclass
class Link:
    bytes_per_s: float
    latency_ms: float = 0.0
    free_ms: float = 0.0


def simulate(
    reqs: list[SimRequest],
    cost: StepCost,
    pol: Policy,
    prefill_workers: int = 1,
    decode_workers: int = 0,
    kv_bytes_per_token: float = 0.0,
    link_bytes_per_s: float = 0.0,
    link_latency_ms: float = 0.0,
    seed: int | None = None,
    seen: list[tuple[int, int]] | None = None,
) -> list[Seq]:
    """Serve ``reqs``; ``decode_workers == 0`` means colocated with ``prefill_workers`` workers.
    With ``seed`` and a cost with ``noise``, each step's time is the fit's × a ratio drawn from it
    (``random.Random(seed)``) × the run's drift, one of ``cost.drift`` drawn first (1 without);
    else exactly the fit's. ``seen`` (when given) receives each simulated step's (prefill tokens,
    decoding sequences). Returns every sequence with its token times (ms from the simulation's
    time 0)."""
    disagg = decode_workers > 0
    pw = [Worker(i, prefill=True, decode=not disagg) for i in range(prefill_workers)]
    dw = [Worker(prefill_workers + i, prefill=False, decode=True) for i in range(decode_workers)]
    links = [Link(link_bytes_per_s, link_latency_ms) for _ in pw]
    seqs = {r.id: Seq(r) for r in reqs}
    ev = _Events(random.Random(seed) if seed is not None and cost.noise else None)
    ev.seen = seen
    if ev.rng is not None and cost.drift:
        ev.drift = cost.drift[ev.rng.randrange(len(cost.drift))]
    for r in sorted(reqs, key=lambda r: (r.arrival_ms, r.id)):
        ev.push(r.arrival_ms, "arrive", r.id)
    while ev.heap:
        t, _, kind, x = heapq.heappop(ev.heap)
        if kind in ("arrive", "kv_ready"):
            w = min(pw if kind == "arrive" else dw, key=lambda w: (w.load, w.index))
            w.waiting.append(seqs[x])
            if not w.busy:
                # an idle worker plans its step after every arrival of this instant (as the runner
                # admits all requests that have arrived before it plans): a "kick" queued behind them
                w.busy = True
                ev.push(t, "kick", w)
        elif kind == "kick":
            _start(x, t, pol, cost, ev)
        else:
            w, segs = x
            for s in _advance(segs, t, w):
                if disagg:  # prompt done on a prefill worker: ship the KV cache
                    w.running.remove(s)
                    ln = links[w.index]
                    begin = max(t, ln.free_ms)
                    done = begin + s.req.prompt * kv_bytes_per_token / ln.bytes_per_s * 1e3 + ln.latency_ms
                    ln.free_ms = done
                    s.transfer_ms = done - t
                    ev.push(done, "kv_ready", s.req.id)
            _start(w, t, pol, cost, ev)
    return [seqs[r.id] for r in reqs]


class _Events:
    """The simulation's event queue: (time, order of pushing, kind, payload)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.heap: list[tuple[float, int, str, Any]] = []
        self.order = 0
        self.rng = rng  # draws each step's noise factor (None: no noise)
        self.drift = 1.0  # the run's drift factor (StepCost.drift), drawn once by simulate
        self.seen: list[tuple[int, int]] | None = None  # each step's (P, D), when asked for

    def push(self, t: float, kind: str, x: Any) -> None:
        heapq.heappush(self.heap, (t, self.order, kind, x))
        self.order += 1


def _start(w: Worker, t: float, pol: Policy, cost: StepCost, ev: _Events) -> None:
    """Worker ``w`` plans and starts its next step at ``t`` (idle when it has nothing to run)."""
    segs = w.plan(pol)
    if not segs:
        w.busy = False
        return
    p = sum(n for _, n, d in segs if not d)
    dec = [s for s, _, d in segs if d]
    # as the fit measures it (step_cost.py): D × the longest context among the decoding sequences
    k = len(dec) * max((s.req.prompt + s.generated for s in dec), default=0)
    for s in dec:
        s.interference_ms += cost.cp * p
    w.busy = True
    if ev.seen is not None:
        ev.seen.append((p, len(dec)))
    factor = ev.drift * cost.noise[ev.rng.randrange(len(cost.noise))] if ev.rng is not None else 1.0
    ev.push(t + cost.ms(p, len(dec), k, factor), "step_end", (w, segs))


def _advance(segs: Any, t: float, w: Worker) -> list[Seq]:
    """A step of ``w`` ends at ``t``: prompt chunks and tokens counted, first and finished tokens
    timed, finished sequences leave; returns the sequences whose prompt just completed a prefill
    chunk and that go on (a disaggregated prefill worker ships them)."""
    done_prompts = []
    for s, n, d in segs:
        if not d:
            s.prefilled += n
            if s.prefilled < s.req.prompt:
                continue
        s.generated += 1
        if s.first_ms is None:
            s.first_ms = t
        if s.generated >= s.req.output:
            s.finish_ms = t
            w.running.remove(s)
        elif not d:
            done_prompts.append(s)
    return done_prompts


def metrics(seqs: list[Seq]) -> list[dict[str, Any]]:
    """Per request: ttft_ms, tpot_ms (None for one token), e2el_ms, interference_ms, transfer_ms."""
    out = []
    for s in seqs:
        assert s.first_ms is not None and s.finish_ms is not None
        r = s.req
        out.append(
            {
                "request": r.id,
                "prompt_tokens": r.prompt,
                "output_tokens": r.output,
                "ttft_ms": s.first_ms - r.arrival_ms,
                "e2el_ms": s.finish_ms - r.arrival_ms,
                "tpot_ms": (s.finish_ms - s.first_ms) / (r.output - 1) if r.output > 1 else None,
                "interference_ms": s.interference_ms,
                "transfer_ms": s.transfer_ms,
            }
        )
    return out
