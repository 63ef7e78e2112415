"""A minimal progress bar for CLI commands: drawn only on an interactive terminal.

Quiet (draws nothing) when the stream is not a TTY (piped, redirected, captured by tests) or when
``CI`` is set to a true value, so logs and machine-read output never contain carriage returns.
Lines written through :meth:`Progress.write` always appear, with the bar redrawn below them.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from tracekit.cli.term import clean

_FALSE = {"", "0", "false", "no", "off"}


def enabled(stream: TextIO | None = None) -> bool:
    """True when a bar should be drawn on ``stream`` (default stderr)."""
    s = stream if stream is not None else sys.stderr
    if os.environ.get("CI", "").strip().lower() not in _FALSE:
        return False
    isatty = getattr(s, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed stream
        return False


class Progress:
    """``with Progress(total, "ingest") as bar: bar.update(1, detail="file.json")``.

    ``total`` may be None (unknown): then only the count is shown. ``write(line)`` prints a
    normal line to ``out`` (default stdout) without garbling the bar.
    """

    def __init__(
        self,
        total: int | None,
        label: str = "",
        stream: TextIO | None = None,
        out: TextIO | None = None,
        show: bool | None = None,
        width: int = 28,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.out = out if out is not None else sys.stdout
        self.show = enabled(self.stream) if show is None else show
        self.width = width
        self.done = 0
        self.detail = ""
        self._start = time.monotonic()
        self._drawn = False

    def __enter__(self) -> Progress:
        self._draw()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1, detail: str = "") -> None:
        self.done += n
        if detail:
            self.detail = detail
        self._draw()

    def write(self, line: str) -> None:
        self._clear()
        print(clean(line), file=self.out, flush=True)
        self._draw()

    def close(self) -> None:
        self._clear()

    def render(self) -> str:
        """The bar's text (without control characters)."""
        elapsed = time.monotonic() - self._start
        if self.total:
            frac = min(1.0, self.done / self.total)
            fill = int(frac * self.width)
            bar = "#" * fill + "-" * (self.width - fill)
            text = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s"
        else:
            text = f"{self.label} {self.done} {elapsed:5.1f}s"
        if self.detail:
            text += f"  {clean(self.detail)}"
        return text[:120]

    def _draw(self) -> None:
        if not self.show:
            return
        self.stream.write("\r\x1b[2K" + self.render())
        self.stream.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self.show and self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False
