"""The two ways a test runs ``tracekit``, for every test file.

- :func:`tk` (and :func:`tk_out`): in this process, through ``tracekit.cli.main.main`` — the same
  error boundary and exit codes as the console script, without an interpreter start-up.
- :func:`tk_process`: a fresh ``python -m tracekit.cli.main`` process, for what only a real
  process shows: the exit status it ends with, a timeout, a crash on hostile input, closed streams.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from typing import Any, NamedTuple

Arg = str | os.PathLike[str]


class Run(NamedTuple):
    """What ``tracekit`` did: its exit status and the text of its standard output and error."""

    code: int
    out: str
    err: str


def _code(rv: object) -> int:
    """The exit status a process would end with for ``main``'s return value or ``SystemExit`` code
    (as ``sys.exit``: None is 0, an int itself, anything else 1)."""
    return 0 if rv is None else rv if isinstance(rv, int) else 1


def tk(*args: Arg) -> Run:
    """``tracekit ARGS`` run in this process: its exit status, standard output and standard error.
    The streams are byte-backed text streams, as a terminal's or a pipe's are (``.buffer`` exists)."""
    from tracekit.cli.main import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rv = main([os.fspath(a) for a in args])
        except SystemExit as exc:
            rv = exc.code
    texts = [s.buffer.getvalue().decode("utf-8") for s in (out, err)]  # type: ignore[attr-defined]
    return Run(_code(rv), texts[0], texts[1])


def tk_out(*args: Arg) -> str:
    """The standard output of ``tracekit ARGS`` run in this process; a non-zero exit fails the test
    with its standard error."""
    code, out, err = tk(*args)
    assert code == 0, (args, code, err)
    return out


def tk_process(
    *args: Arg, timeout: float = 300, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """``tracekit ARGS`` as a fresh process (matplotlib's Agg backend; ``env`` added to this
    process's environment): its exit status, standard output and standard error as text."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "tracekit.cli.main", *map(os.fspath, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "MPLBACKEND": "Agg", **(env or {})},
        **kw,
    )
