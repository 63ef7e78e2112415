"""The ``tracekit`` click group and the single error boundary.

Subcommands live one per module in ``tracekit/cli/`` and are imported lazily, so that
``tracekit --help`` stays fast and ``tracekit run`` alone reaches torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from tracekit.cli.term import clean, echo
from tracekit.errors import InternalError, OutputError, TracekitError, UsageError, debug, one_line

# command name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": ("tracekit.cli.ingest", "ingest", "Read traces into a canonical Parquet dataset."),
    "summary": ("tracekit.cli.summary", "summary", "One screen about a trace: devices, events, busy time."),
    "analyze": ("tracekit.cli.analyze", "analyze", "Per-region and per-phase verdicts with their numbers."),
    "report": ("tracekit.cli.report", "report", "Markdown / HTML / JSON report for a bug report."),
    "plot": ("tracekit.cli.plot", "plot", "Draw one plot (roofline, timeline, ...) to PNG or SVG."),
    "diff": ("tracekit.cli.diff", "diff", "Compare two traces phase by phase."),
    "label": ("tracekit.cli.label", "label", "Write the trace back with phases and verdicts added."),
    "run": ("tracekit.cli.run", "run", "Run a workload under torch.profiler (needs tracekit[workloads])."),
    "whatif": ("tracekit.cli.whatif", "whatif", "What halving prefill/TPOT saves; colocated vs disaggregated serving."),
    "calibrate": ("tracekit.cli.calibrate", "calibrate", "Measure this machine's peaks into a hardware file."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from :data:`COMMANDS` alone: ``tracekit --help`` imports no command
        module (they import polars; tests/test_startup.py pins this)."""
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module_name, attr, short_help = spec
        cmd: click.Command = getattr(importlib.import_module(module_name), attr)
        if cmd.short_help is None:
            cmd.short_help = short_help
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracekit")
def cli() -> None:
    """tracekit: where prefill and decode spend their time, and why."""


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the CLI; typed library errors become one line on stderr and an exit code.
    From the command line (``argv`` None) the process then ends at once (:func:`_leave`)."""
    if argv is not None:  # called from Python (tests, scripts): an ordinary return or SystemExit
        return _run(argv)
    if sys.stdout is None:  # started with standard output closed (`>&-`): nowhere to print
        _say("tracekit: error: cannot write the output: standard output is closed")
        os._exit(OutputError.exit_code)
    try:
        rv = _run(None)
    except SystemExit as exc:
        _leave(exc.code)
        raise
    _leave(rv)
    return rv


def _check_env() -> None:
    """Environment values polars would panic on (a traceback from its thread pool) as one line."""
    threads = os.environ.get("POLARS_MAX_THREADS")
    if threads is not None and not (threads.strip().isascii() and threads.strip().isdigit() and int(threads) > 0):
        raise UsageError(f"POLARS_MAX_THREADS={threads!r}: must be a positive integer (or unset)")


def _run(argv: list[str] | None) -> Any:
    from tracekit.tables import locks  # no polars: the writer lock's waiting notice goes to stderr

    locks.on_wait = lambda line: echo(f"tracekit: {line}", err=True)
    try:
        _check_env()
        return cli.main(args=argv, prog_name="tracekit", standalone_mode=False)
    except TracekitError as exc:
        echo(f"tracekit: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("tracekit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        setattr(exc, "message", clean(exc.message))  # a path or value echoed back may hold control characters
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("tracekit: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # e.g. stdout on a full disk: one line, not a traceback
        where = f"{clean(str(exc.filename))}: " if exc.filename else ""
        echo(f"tracekit: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(OutputError.exit_code)
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a bug (or a polars panic): its own exit code, never 1
        if debug():
            raise
        echo(f"tracekit: internal error: {one_line(exc)} (a bug; TRACEKIT_DEBUG=1 shows the traceback)", err=True)
        sys.exit(InternalError.exit_code)


# Modules whose exit handlers must run (a Dask cluster's processes, torch's profiler and device
# state): with one of them loaded the interpreter ends the ordinary way.
_NEEDS_EXIT_HANDLERS = ("distributed", "torch")


def _leave(code: object) -> None:
    """End the process now, with ``code`` (None or an int; anything else returns and Python's own
    exit handles it), once stdout and stderr are flushed: everything a command writes is closed
    before it returns, so tearing down the interpreter's objects — polars frames, module state,
    thread pools, a noticeable part of a short command's time — would only delay the shell.
    Skipped when a module in :data:`_NEEDS_EXIT_HANDLERS` is loaded."""
    if not (code is None or isinstance(code, int)) or any(m in sys.modules for m in _NEEDS_EXIT_HANDLERS):
        return
    status = code or 0
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # stderr closed (`2>&-`): nothing to flush
            continue
        try:
            stream.flush()
        except BrokenPipeError:  # a reader that stopped early (`| head`): not a failure
            pass
        except (OSError, ValueError) as exc:  # e.g. stdout on a full disk
            status = status or OutputError.exit_code
            if stream is sys.stdout:
                _say(f"tracekit: error: cannot write the output: {getattr(exc, 'strerror', None) or exc}")
    os._exit(status)


def _say(line: str) -> None:
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
