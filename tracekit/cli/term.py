"""Terminal output: the one function every CLI print goes through.

Trace data (kernel, op and annotation names, device names, file names) reaches the terminal
through ``summary``, ``analyze``, ``diff`` and every error line. A name holding ESC or BEL
sequences could retitle the terminal, write the clipboard (OSC 52) or hide text; bidi controls
can reorder what is shown. :func:`clean` shows every such character as a visible escape
(``\\x1b``, ``\\u202e``) instead: C0 controls except tab and newline, DEL, C1 controls, and the
Unicode bidi/direction marks. :func:`echo` is ``click.echo`` after :func:`clean`; cli modules use
it for every line they print.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

import click

from tracekit.conventions import TERMINAL_UNSAFE

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in TERMINAL_UNSAFE) + "]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(text: str) -> str:
    """``text`` with terminal control characters shown as visible escapes (newlines and tabs kept)."""
    return _CONTROL.sub(_escape, text)


def echo(message: Any = None, err: bool = False, nl: bool = True, file: IO[Any] | None = None) -> None:
    """``click.echo`` of ``message`` made safe for a terminal (:func:`clean`)."""
    if isinstance(message, (bytes, bytearray)):  # already terminal safe (report/formats/json_print.py)
        stream = file if file is not None else sys.stderr if err else sys.stdout
        if getattr(stream, "buffer", None) is None:  # a text-only stream (io.StringIO, a redirect)
            message = bytes(message).decode("utf-8")
    elif message is not None:
        message = clean(str(message))
    click.echo(message, file=file, nl=nl, err=err)
