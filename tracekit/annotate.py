"""Phase annotations: one name, written both as a torch.profiler range and as an NVTX range.

The naming convention (shared by every part of tracekit; see docs/annotations.md)::

    tk:<phase> key=value key=value ...

e.g. ``tk:prefill step=0 batch=4 prompt_tokens=512 ctx=512``, ``tk:decode step=17 batch=4 ctx=530``,
``tk:mixed step=3 prefill_tokens=256 decode_seqs=6``, or a container such as ``tk:run workload=llm``.
Keys are ``[A-Za-z_][A-Za-z0-9_]*``; values hold no whitespace and no ``=``.

``format_phase_name`` and ``parse_phase_name`` are pure and never import torch, so the analysis side
can use them without the ``workloads`` extra. ``phase(...)`` imports torch and nvtx lazily, on first
entry, and skips the ``record_function`` call when no torch profiler is recording (the NVTX range is
always pushed: an attached Nsight cannot be detected cheaply, and a push/pop costs about 1 µs).
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any, Callable, TypeVar

from tracekit.errors import MissingDependencyError, UsageError

PREFIX = "tk:"
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PHASE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_BAD_VALUE = re.compile(r"[\s=]")

F = TypeVar("F", bound=Callable[..., Any])


def _value_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_phase_name(phase: str, **attrs: object) -> str:
    """The annotation name for ``phase`` with ``attrs`` in the given order.

    Raises :class:`~tracekit.errors.UsageError` if the phase or a key is not an identifier, or a
    value contains whitespace or ``=`` (it could not be parsed back).
    """
    if not _PHASE.match(phase):
        raise UsageError(f"phase name {phase!r} must be an identifier-like word (no spaces)")
    parts = [PREFIX + phase]
    for key, value in attrs.items():
        if not _KEY.match(key):
            raise UsageError(f"annotation key {key!r} must be an identifier")
        text = _value_text(value)
        if not text or _BAD_VALUE.search(text):
            raise UsageError(f"annotation value {text!r} for {key!r} must be non-empty, without spaces or '='")
        parts.append(f"{key}={text}")
    return " ".join(parts)


def parse_phase_name(name: str) -> dict[str, str] | None:
    """Parse a ``tk:`` annotation name back into ``{"phase": ..., **attrs}`` (all values strings).

    Returns None when ``name`` is not a well-formed tk: name (other prefix, empty phase, a token
    without ``=``, a bad key, or a repeated key), so foreign annotations are never misread.
    Pure: never imports torch.
    """
    if not isinstance(name, str) or not name.startswith(PREFIX):
        return None
    tokens = name.split()
    phase = tokens[0][len(PREFIX) :]
    if not _PHASE.match(phase):
        return None
    out: dict[str, str] = {"phase": phase}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or not value or "=" in value or not _KEY.match(key) or key in out:
            return None
        out[key] = value
    return out


# --- requests served by a step (docs/annotations.md, "Requests in serving steps") -------------


def format_id_list(ids: list[int]) -> str:
    """Request ids as ascending comma-separated items, a run of consecutive ids as ``lo-hi``:
    ``[0, 1, 2, 3, 7, 9, 10]`` → ``"0-3,7,9-10"``. ``ids`` must be non-negative; order and
    duplicates do not matter."""
    out: list[str] = []
    for _, pairs in itertools.groupby(enumerate(sorted(set(ids))), lambda p: p[1] - p[0]):
        run = [i for _, i in pairs]
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def parse_id_list(text: str) -> list[int]:
    """Inverse of :func:`format_id_list`: ``"0-3,7"`` → ``[0, 1, 2, 3, 7]``; ValueError when malformed."""
    out: list[int] = []
    for item in text.split(","):
        lo, sep, hi = item.partition("-")
        a = int(lo)
        b = int(hi) if sep else a
        if a < 0 or b < a:
            raise ValueError(f"bad id range {item!r}")
        out.extend(range(a, b + 1))
    return out


def request_attrs(
    decode_ids: list[int], prefill: list[tuple[int, int, bool]], arrivals: list[tuple[int, int]]
) -> dict[str, str]:
    """The request-level keys of a serving step, for :func:`format_phase_name`:

    - ``dc``: requests that decode one token in this step (:func:`format_id_list`);
    - ``pf``: prefill chunks ``id:tokens``, with ``!`` appended when the chunk completes the
      prompt (the request's first output token is sampled at the end of this step);
    - ``arr``: requests scheduled for the first time in this step, ``id:us`` = they arrived
      ``us`` microseconds before the step started.

    Keys with nothing to say are left out. Cost is a few µs for hundreds of requests."""
    out: dict[str, str] = {}
    if decode_ids:
        out["dc"] = format_id_list(decode_ids)
    if prefill:
        out["pf"] = ",".join(f"{i}:{n}{'!' if last else ''}" for i, n, last in prefill)
    if arrivals:
        out["arr"] = ",".join(f"{i}:{max(0, us)}" for i, us in arrivals)
    return out


class phase:  # noqa: N801 — used like a function: ``with phase("decode", step=3):``
    """Context manager and decorator: a ``record_function`` range plus an NVTX range, same name.

    ``with phase("decode", step=3, batch=4, ctx=130): ...`` or ``@phase("run", workload="llm")``.
    Re-entrant (each entry keeps its own handle). Needs torch and nvtx only when entered; a missing
    ``nvtx`` package just drops the NVTX half.
    """

    __slots__ = ("name", "_stack")

    def __init__(self, name: str, **attrs: object) -> None:
        self.name = format_phase_name(name, **attrs)
        self._stack: list[Any] = []

    def __enter__(self) -> "phase":
        rt = _runtime()
        handle = None
        if rt.profiler_enabled():
            handle = rt.rf_enter(self.name)
        self._stack.append(handle)
        if rt.nvtx_push is not None:
            rt.nvtx_push(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        rt = _runtime()
        if rt.nvtx_pop is not None:
            rt.nvtx_pop()
        handle = self._stack.pop()
        if handle is not None:
            rt.rf_exit(handle)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class _Runtime:
    """The torch/nvtx entry points, bound once (lazy import keeps ``import tracekit`` torch-free)."""

    def __init__(self) -> None:
        try:
            import torch
        except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
            raise MissingDependencyError("phase() needs torch: pip install 'tracekit[workloads]'") from exc
        self.profiler_enabled: Callable[[], bool] = torch._C._autograd._profiler_enabled
        self.rf_enter: Callable[[str], Any] = torch.ops.profiler._record_function_enter_new
        self.rf_exit: Callable[[Any], Any] = torch.ops.profiler._record_function_exit._RecordFunction
        self.nvtx_push: Callable[[str], Any] | None = None
        self.nvtx_pop: Callable[[], Any] | None = None
        try:
            import nvtx

            self.nvtx_push = nvtx.push_range
            self.nvtx_pop = nvtx.pop_range
        except ModuleNotFoundError:  # pragma: no cover - nvtx ships with the workloads extra
            pass


@functools.cache
def _runtime() -> _Runtime:
    return _Runtime()
