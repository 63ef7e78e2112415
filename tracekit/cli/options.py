"""The CLI's one set of conventions, as option decorators every command uses.

- ``--out/-o PATH``: every command that writes a file or directory; without it output goes to stdout.
- ``--force``: required to overwrite anything that exists (files, a run's output directory).
- ``--format``: ``text`` is plain text on every command (``table`` is accepted for it); ``md`` and
  ``markdown`` are the same format everywhere (normalised to ``md``).
- ``--regions N|all``: how many regions a text, Markdown or HTML output lists (``analyze``, ``report``).
- ``--trace-id``: a trace of a dataset, by its id or any unique prefix of it.
- ``--hardware``: the help lists every device name of the hardware table.
- ``--phase-map REGEX=PHASE``: extra phase rules (``analyze``, ``whatif``, …), one definition.
- ``--capture TRACE`` (ingest, analyze, report, diff, label), ``--model CONFIG.json`` (those and
  whatif), the ranks options (analyze, report).

tests/test_cli_conventions.py walks click's command tree and checks each command against these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from tracekit.hardware.peaks import table_keys

F = TypeVar("F", bound=Callable[..., Any])


def out_option(help: str, required: bool = False, **kw: Any) -> Callable[[F], F]:
    """``--out/-o``: where the command writes (stdout when absent, unless required)."""
    return click.option("--out", "-o", "out", required=required, default=None, help=help, **kw)


def force_option(what: str = "an existing output") -> Callable[[F], F]:
    return click.option("--force", is_flag=True, help=f"Overwrite {what}.")


ALIASES = {"markdown": "md", "table": "text"}


def format_option(choices: Sequence[str], default: str | None, help: str = "Output format.") -> Callable[[F], F]:
    """``--format``: ``md`` in ``choices`` accepts ``markdown`` too (the command sees ``md``), and
    ``text`` accepts ``table`` (the command sees ``text``)."""
    names = list(choices)
    for alias, name in ALIASES.items():
        if name in names and alias not in names:
            names.insert(names.index(name) + 1, alias)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(names),
        default=default,
        show_default=default is not None,
        callback=lambda ctx, param, value: ALIASES.get(value, value),  # the alias's name (None stays None)
        help=help,
    )


def trace_id_option(
    help: str = "Which trace of a dataset holding several: its id or a unique prefix.", *names: str
) -> Callable[[F], F]:
    return click.option(*(names or ("--trace-id",)), default=None, metavar="ID", help=help)


def hardware_help(prefix: str = "Device peaks") -> str:
    return (
        f"{prefix}: a name from the hardware table ({', '.join(table_keys())}) or a hardware file (tracekit calibrate)."
    )


def hardware_option(*names: str, help: str | None = None) -> Callable[[F], F]:
    decls = names or ("--hardware",)
    return click.option(*decls, default=None, metavar="NAME|FILE", help=help or hardware_help())


def phase_map_option() -> Callable[[F], F]:
    """``--phase-map REGEX=PHASE`` (repeatable): extra phase rules for region names."""
    return click.option(
        "--phase-map",
        "phase_map",
        multiple=True,
        metavar="REGEX=PHASE",
        help="Extra phase rule for region names (repeatable); PHASE is prefill, decode, mixed or other.",
    )


def regions_option(default: str | None, help: str) -> Callable[[F], F]:
    """``--regions N|all``: the regions a text, Markdown or HTML output lists (most device time
    first); the command receives None (its own default), a count, or -1 for all."""
    return click.option(
        "--regions",
        "regions",
        default=default,
        show_default=default is not None,
        metavar="N|all",
        callback=_parse_regions,
        help=help,
    )


def _parse_regions(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    if str(value).strip().lower() == "all":
        return -1
    try:
        n = int(value)
    except ValueError:
        n = -2
    if n < 0:
        raise click.BadParameter(f"{value!r}: give a number of regions or 'all'")
    return n


capture_option = click.option(
    "--capture",
    "captures",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="TRACE",
    help="Graph-capture trace whose ops the CUDA/HIP graph replays inherit, or a graph-node "
    "annotation file (JSON keyed by graph node id) (repeatable); a capture_traces/ folder beside "
    "the trace is used without it.",
)

model_option = click.option(
    "--model",
    "model",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    metavar="CONFIG.json",
    help="The model's Hugging Face config.json: fills what the trace lacks (MoE top-k and expert "
    "size, attention heads, KV bytes per token, weight format); the trace wins where both say.",
)

map_option = click.option(
    "--map",
    "map",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    metavar="EAGER_TRACE",
    help="A trace of the same model run eagerly: the graph replays' kernels without ops take the costs "
    "of its kernels at the same place in the step and its layers where the names agree (docs/analysis.md, "
    "'Kernel map').",
)


parallel_option = click.option(
    "--parallel",
    "parallel",
    default=None,
    metavar="tp=N,ep=N,dp=N,pp=N",
    help="The traced rank's parallel layout, e.g. tp=8 or tp=2,ep=8: overrides what the trace says "
    "(attention heads and experts per rank, world size) when --model's sizes are divided per rank "
    "(docs/costmodel.md).",
)


RANKS_OPTIONS = [
    click.option(
        "--rank",
        "rank",
        default=None,
        metavar="0,2,4-7",
        help="Traces of a dataset with these recorded ranks (compared across ranks when several).",
    ),
    click.option(
        "--compare",
        "compare",
        multiple=True,
        metavar="ID_PREFIX",
        help="Traces of a dataset whose id starts with this (repeatable), compared across ranks. "
        "A dataset of several traces is compared whole without it; either way the traces are grouped "
        "into jobs and ranks are compared only within a job (docs/scale.md).",
    ),
    click.option(
        "--workers",
        type=int,
        default=None,
        help="Dask LocalCluster workers for the per-trace analyses (default: one per core; 1 = serial).",
    ),
    click.option(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="Run the per-trace analyses on this Dask cluster (default: $DASK_SCHEDULER_ADDRESS).",
    ),
]


def ranks_options(f: F) -> F:
    """``--rank``, ``--compare``, ``--workers``, ``--scheduler``: several traces of a dataset compared
    across ranks (``analyze``, ``report``; tracekit/commands/ranks.py, docs/scale.md)."""
    for opt in reversed(RANKS_OPTIONS):
        f = opt(f)
    return f
