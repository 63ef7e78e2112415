"""Report files: what ``--out`` writes gets the terminal's cleaning (tracekit/cli/term.py).

A report file is read in a terminal (``cat``, ``less -R``), pasted into bug trackers and opened
in editors that act on control sequences, so a trace-provided name holding OSC 52 (``ESC ] 52 ;
… BEL``: write the clipboard), a bidi override (``\\u202e``) or NUL must not reach it raw, any
more than it reaches the screen. Markdown, HTML and text files: every such character as a
visible escape (``\\x1b``, ``\\u202e``, ``\\x00``), as :func:`tracekit.cli.term.clean` prints it.
JSON files: JSON already escapes C0 controls; DEL, C1 and the bidi marks become ``\\uXXXX``
escapes (:func:`tracekit.report.formats.json_print.safe`), the same characters once parsed.
"""

from __future__ import annotations

from tracekit.cli.term import clean, echo
from tracekit.commands.output import Output
from tracekit.report.formats.json_print import safe
from tracekit.report.output import write_atomic


def cleaned(text: str | bytes, fmt: str) -> bytes:
    """The bytes of a report file of format ``fmt`` (``json``, a text format, or ``bytes``: a
    picture or a trace, written as they are) holding ``text``."""
    if fmt == "bytes":
        return bytes(text) if isinstance(text, bytes) else text.encode("utf-8")
    if fmt == "json":
        return safe(text.encode("utf-8") if isinstance(text, str) else bytes(text))
    s = text if isinstance(text, str) else bytes(text).decode("utf-8", errors="replace")
    return clean(s).encode("utf-8")


def show(o: Output) -> None:
    """A service's output (tracekit/commands/output.py): printed, or written to its file atomically
    (:func:`tracekit.report.output.write_atomic` of :func:`cleaned`) with its notes on stderr; then
    its error raised."""
    if o.out is None:
        # bytes (a JSON document, whole or in pieces) are already terminal safe: report/formats/json_print.py
        for piece in [o.body] if isinstance(o.body, (str, bytes)) else o.body:
            echo(piece, nl=False)
    else:
        write_atomic(o.out, cleaned(o.body if isinstance(o.body, (str, bytes)) else b"".join(o.body), o.fmt))
        for line in o.notes:
            echo(line, err=True)
    if o.error is not None:
        raise o.error
