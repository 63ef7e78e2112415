"""The ``tracekit`` entry point, and its one shortcut: a stored result printed before click loads.

``tracekit analyze DATASET --format json`` of a trace analysed before with the same options prints
the stored document (tracekit/tables/results.py), read and written in pieces. That takes an
interpreter, the lookup and the writes; click and the command modules would nearly double that.
:func:`stored_document` recognises only the plainest spelling of that command —
``analyze``, one dataset folder, ``--format json`` (or ``--format=json``) in any order, nothing
else — and returns the stored document when the lookup hits. Anything else, a miss included, goes
to the click command (:func:`tracekit.cli.main.main`), which parses, checks and reports as always
and reaches the same stored document for the same command line.

No click, no polars here: this module is imported by every command.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracekit.tables.results import Stored


def stored_document(argv: list[str]) -> Stored | None:
    """The stored JSON document ``tracekit ARGV`` would print (read as it is printed), when ARGV is
    ``analyze DIR --format json`` (either order; ``--format=json`` too) and DIR is a dataset with a
    current stored result for those (default) options; None otherwise."""
    if len(argv) not in (3, 4) or argv[0] != "analyze":
        return None
    rest = argv[1:]
    if "--format=json" in rest:
        rest.remove("--format=json")
    elif "--format" in rest and rest.index("--format") + 1 < len(rest) and rest[rest.index("--format") + 1] == "json":
        del rest[rest.index("--format") : rest.index("--format") + 2]
    else:
        return None
    from tracekit.tables.layout import is_dataset
    from tracekit.tables.results import analysis_options, lookup

    if len(rest) != 1 or rest[0].startswith("-") or not is_dataset(rest[0]):
        return None
    try:
        return lookup(rest[0], None, analysis_options(None, (), None, None))
    except Exception:  # noqa: BLE001 - whatever went wrong, the command itself decides and reports
        return None


def main() -> Any:
    """The console script: a stored document printed at once, or the click command."""
    doc = stored_document(sys.argv[1:]) if sys.stdout is not None else None
    if doc is None:  # (standard output closed: the command says so)
        from tracekit.cli.main import main as command

        return command()
    status = 0
    try:
        for piece in doc.pieces():
            sys.stdout.buffer.write(piece)
        sys.stdout.flush()
    except BrokenPipeError:  # a reader that stopped early (`| head`): not a failure
        pass
    except OSError as exc:  # e.g. stdout on a full disk: one line, as the command says it
        if sys.stderr is not None:
            sys.stderr.write(f"tracekit: error: cannot write the output: {exc.strerror or exc}\n")
        status = 8  # tracekit.errors.OutputError (not imported here: this module stays light)
    except Exception as exc:  # noqa: BLE001 - the entry changed while printed (results.StoredChanged)
        if sys.stderr is not None:
            sys.stderr.write(f"tracekit: error: {exc}\n")
        status = getattr(exc, "exit_code", 1)
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    finally:
        os._exit(status)  # nothing else to tear down (as tracekit.cli.main._leave)
