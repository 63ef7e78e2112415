"""What a service hands back to its command (the output, where it goes, an error to raise after),
and the progress bar a command lends it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tracekit.errors import TracekitError


@dataclass(frozen=True)
class Output:
    """``body`` (text, bytes, or bytes in pieces, each made as it is printed) printed, or written to
    ``out`` (a path checked before the work) as a file of format ``fmt`` (``json`` keeps JSON escapes,
    ``bytes`` is written as it is)
    followed by the ``notes`` lines on stderr; then ``error``, when set, is raised (the exit code)."""

    body: str | bytes | Iterator[bytes]
    fmt: str = "text"
    out: Path | None = None
    notes: tuple[str, ...] = ()
    error: TracekitError | None = None


def output(body: str | bytes | Iterator[bytes], fmt: str, out: Path | None, *notes: str) -> Output:
    """An :class:`Output` whose file, when written, is named on stderr (``wrote PATH``) before ``notes``."""
    return Output(body, fmt, out, (f"wrote {out}", *notes) if out is not None else ())


class Bar(Protocol):
    """A progress bar (tracekit.cli.progress.Progress): lines written through it show above it."""

    def update(self, n: int = 1, detail: str = "") -> None: ...

    def write(self, line: str) -> None: ...


Progress = Callable[[int, str], AbstractContextManager[Bar]]


class Lines(list[str]):
    """A :data:`Progress` that draws nothing and keeps the lines written through it (tests, scripts)."""

    def __call__(self, total: int, label: str) -> AbstractContextManager[Lines]:
        return nullcontext(self)

    def update(self, n: int = 1, detail: str = "") -> None:
        pass

    def write(self, line: str) -> None:
        self.append(line)
