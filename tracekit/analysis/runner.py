"""The analysis as data: a :class:`Step` declares the state fields it reads (its parameters) and
writes (its results); :func:`execute` runs a tuple of them over a state object and lets go of each
field as soon as no later step reads it.

A step is a plain function made a step by :func:`step`::

    @step("busy_share")
    def busy_share(reg: pl.DataFrame) -> pl.DataFrame:
        \"\"\"Each region's busy time over the whole trace's.\"\"\"
        ...

Its parameter names are the fields it reads; ``step("a", "b")`` names what it returns (one value,
or a tuple in that order). :meth:`Step.on` binds the same function to other fields (one mark applied
to regions, then to phases). Adding an analysis is adding one entry to the tuple; :func:`check`
refuses a tuple where a step reads a field nothing gave or wrote before it.

**Memory by declaration**: before a step runs, every field it is the last reader of is taken out of
the state, so only the step's call holds it and the frame is freed as soon as that step returns
(unless the step passes it on in what it writes); fields in ``keep`` stay. Nothing else releases
memory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Step:
    """One analysis step: ``fn`` called with the fields ``reads`` (as its parameters ``params``),
    its result stored in the fields ``writes``."""

    fn: Callable[..., Any]
    params: tuple[str, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    label: str

    @property
    def doc(self) -> str:
        """The first sentence of the function's docstring: what the step adds."""
        text = " ".join((inspect.getdoc(self.fn) or "").split())
        return text.split(". ")[0].rstrip(".")

    def on(self, **fields: str) -> Step:
        """The same step over other fields: ``mark.on(frame="phases")`` reads and writes ``phases``
        where the function says ``frame``."""
        unknown = set(fields) - set(self.params) - set(self.writes)
        if unknown:
            raise ValueError(f"step {self.label}: no parameter or result named {sorted(unknown)}")
        reads = tuple(fields.get(p, r) for p, r in zip(self.params, self.reads))
        writes = tuple(fields.get(w, w) for w in self.writes)
        label = f"{self.fn.__name__} ({', '.join(fields.values())})"
        return replace(self, reads=reads, writes=writes, label=label)


def step(*writes: str, name: str | None = None, **fields: str) -> Callable[[Callable[..., Any]], Step]:
    """Make a function a :class:`Step` that writes ``writes``: its parameters are what it reads,
    each the field of its name unless ``fields`` maps it to another (an existing function registered
    as it is: ``step("prep", acts="activities", name="roofline_inputs")(prepare)``)."""

    def make(fn: Callable[..., Any]) -> Step:
        params = tuple(inspect.signature(fn).parameters)
        reads = tuple(fields.get(p, p) for p in params)
        return Step(fn, params, reads, tuple(writes), name or fn.__name__)

    return make


def check(steps: Sequence[Step], given: Iterable[str], fields: Iterable[str]) -> None:
    """Raise ValueError unless every field a step reads was ``given`` or written by an earlier step,
    and every field named is one of ``fields`` (the state's declared fields)."""
    known, declared = set(given), set(fields)
    for s in steps:
        for name in (*s.reads, *s.writes):
            if name not in declared:
                raise ValueError(f"step {s.label}: {name!r} is not a field of the state")
        missing = [r for r in s.reads if r not in known]
        if missing:
            raise ValueError(f"step {s.label} reads {missing}, which no earlier step writes")
        known.update(s.writes)


def last_readers(steps: Sequence[Step], keep: Iterable[str] = ()) -> list[tuple[str, ...]]:
    """For each step, the fields it is the last reader of (taken out of the state before it runs);
    fields in ``keep`` are never taken."""
    last: dict[str, int] = {}
    for i, s in enumerate(steps):
        for r in s.reads:
            last[r] = i
    kept = set(keep)
    return [tuple(f for f in dict.fromkeys(s.reads) if last[f] == i and f not in kept) for i, s in enumerate(steps)]


def execute(steps: Sequence[Step], state: Any, keep: Iterable[str] = ()) -> Any:
    """Run ``steps`` in order over ``state`` (an object whose attributes are the fields) and return
    it: each step's reads taken from it, its results stored in it, each field let go before the step
    that reads it last (module docstring, "Memory"). When the last step is done the state holds
    ``keep`` alone."""
    kept = set(keep)
    plan = last_readers(steps, kept)
    fields: dict[str, Any] = state.__dict__
    for s, release in zip(steps, plan):
        args = {p: fields[r] for p, r in zip(s.params, s.reads)}
        for name in release:
            del fields[name]
        out = s.fn(**args)
        del args
        values = (out,) if len(s.writes) == 1 else tuple(out)
        if len(values) != len(s.writes):
            raise ValueError(f"step {s.label} returned {len(values)} values for {s.writes}")
        for name, value in zip(s.writes, values):
            fields[name] = value
    for name in [n for n in fields if n not in kept]:
        del fields[name]
    return state
