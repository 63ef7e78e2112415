"""Continuous-batching scheduler for the serving loop. Pure Python (no torch), so it is testable alone.

Each step, in this order:

1. every running sequence whose prompt is fully prefilled and that still owes tokens decodes one
   token (``--token-budget >= --max-seqs`` is enforced, so decodes never starve);
2. the remaining budget goes to prefill chunks: first to running sequences whose prompt is still
   partly unprocessed (admission order), then to newly admitted arrived requests while a KV slot
   is free (``--max-seqs``). One request gets at most ``--chunk`` prompt tokens per step.

A sequence whose prompt completes in a step samples its first token at the end of that step; a
sequence leaves (freeing its slot) at the end of the step that produced its last token.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class Request:
    id: int
    prompt_len: int
    output_len: int
    arrival_s: float  # offset from the loop start
    slot: int = -1
    prefilled: int = 0  # prompt tokens already in the KV cache
    generated: int = 0  # output tokens produced
    first_token_ns: int | None = None
    finish_ns: int | None = None

    @property
    def in_decode(self) -> bool:
        return self.prefilled == self.prompt_len and self.generated < self.output_len

    @property
    def position(self) -> int:
        """KV position of the next token fed to the model."""
        return self.prefilled + max(self.generated - 1, 0) if self.in_decode else self.prefilled


@dataclass(frozen=True)
class Segment:
    request: Request
    start: int  # first KV position written by this segment
    n: int  # tokens in this step
    decode: bool
    samples: bool  # its last token's logits are sampled (decode, or a prompt completing)


@dataclass
class StepPlan:
    segments: list[Segment] = field(default_factory=list)

    @property
    def prefill_tokens(self) -> int:
        return sum(s.n for s in self.segments if not s.decode)

    @property
    def decode_seqs(self) -> int:
        return sum(1 for s in self.segments if s.decode)

    @property
    def tokens(self) -> int:
        return sum(s.n for s in self.segments)

    @property
    def kind(self) -> str:
        if self.prefill_tokens and self.decode_seqs:
            return "mixed"
        return "prefill" if self.prefill_tokens else "decode"


class Scheduler:
    def __init__(self, token_budget: int, max_seqs: int, chunk: int) -> None:
        self.token_budget = token_budget
        self.max_seqs = max_seqs
        self.chunk = chunk
        self.waiting: deque[Request] = deque()  # arrived, not yet admitted
        self.running: list[Request] = []  # admitted, holding a slot
        self.free_slots = list(range(max_seqs - 1, -1, -1))

    def arrive(self, req: Request) -> None:
        self.waiting.append(req)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def plan(self) -> StepPlan:
        plan = StepPlan()
        budget = self.token_budget
        for r in self.running:
            if r.in_decode:
                plan.segments.append(Segment(r, r.position, 1, True, True))
                budget -= 1
        for r in self.running:
            if budget <= 0:
                break
            if r.prefilled < r.prompt_len:
                budget -= self._chunk(plan, r, budget)
        while budget > 0 and self.waiting and self.free_slots:
            r = self.waiting.popleft()
            r.slot = self.free_slots.pop()
            self.running.append(r)
            budget -= self._chunk(plan, r, budget)
        return plan

    def _chunk(self, plan: StepPlan, r: Request, budget: int) -> int:
        n = min(self.chunk, budget, r.prompt_len - r.prefilled)
        plan.segments.append(Segment(r, r.prefilled, n, False, r.prefilled + n == r.prompt_len))
        return n

    def commit(self, plan: StepPlan, now_ns: int) -> list[Request]:
        """Apply a finished step at host time ``now_ns``; return the requests that completed."""
        done: list[Request] = []
        for s in plan.segments:
            r = s.request
            if not s.decode:
                r.prefilled += s.n
            if s.samples:
                r.generated += 1
                if r.first_token_ns is None:
                    r.first_token_ns = now_ns
                if r.generated == r.output_len:
                    r.finish_ns = now_ns
                    done.append(r)
        for r in done:
            self.running.remove(r)
            self.free_slots.append(r.slot)
        return done
