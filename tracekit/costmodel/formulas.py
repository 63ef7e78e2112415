"""Per-signature FLOP and minimum-byte formulas (see docs/costmodel.md for every convention).

One call of :func:`signature_cost` evaluates one unique operator signature
(name, Input Dims, Input type, Concrete Inputs); :mod:`tracekit.costmodel.ops` calls it once per
*unique* signature of an ops table and joins the results back, so the Python here never runs
per row. Pure functions, no polars, no torch.

This module is the registry: op name → formula. The formulas live by family: ``gemm.py``,
``attention.py``, ``norm.py`` (normalisation, softmax), ``channel_norm.py`` (batch, instance,
group norm), ``elementwise.py`` (elementwise, reductions), ``movement.py`` (data movement),
``engine.py`` (serving-engine operators), ``vllm_ops.py`` (vLLM's own ops and their aiter /
sgl_kernel counterparts), ``fused.py`` (Inductor kernels); their inputs are
parsed by ``args.py``. A new op's formula goes in its family's ``*_FORMULAS``.
"""

from __future__ import annotations

import re
from typing import Callable, Final

import polars as pl

from tracekit.costmodel.args import DTYPES, Arg, Cost, NoModel, parse_args
from tracekit.costmodel.attention import ATTENTION_FORMULAS
from tracekit.costmodel.channel_norm import CHANNEL_NORM_FORMULAS
from tracekit.costmodel.elementwise import ELEMENTWISE_FORMULAS
from tracekit.costmodel.engine import ENGINE_FORMULAS, NAME_SERIAL_RE, PATTERN_FORMULAS, Contradiction
from tracekit.costmodel.gemm import GEMM_FORMULAS
from tracekit.costmodel.movement import MOVEMENT_FORMULAS
from tracekit.costmodel.norm import NORM_FORMULAS
from tracekit.costmodel.vllm_ops import VLLM_FORMULAS

# DTYPES is re-exported: callers price ops through this one module.
__all__ = ["CONTRADICTION", "DTYPES", "FORMULAS", "Arg", "Cost", "canonical_name", "priced_expr", "signature_cost"]
# Model name of a signature whose inputs contradict each other (no cost; ``note`` says why).
CONTRADICTION: Final = "contradiction"

FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    **GEMM_FORMULAS,
    **ATTENTION_FORMULAS,
    **ENGINE_FORMULAS,
    **VLLM_FORMULAS,
    **NORM_FORMULAS,
    **CHANNEL_NORM_FORMULAS,
    **ELEMENTWISE_FORMULAS,
    **MOVEMENT_FORMULAS,
}


def formula_for(name: str) -> Callable[[list[Arg]], Cost] | None:
    """The formula pricing ``name`` (exact names first, then the name patterns), or None."""
    f = FORMULAS.get(name)
    if f is None:
        for pat, g in PATTERN_FORMULAS:
            if re.search(pat, name):
                return g(name)
    return f


def priced_expr(name: pl.Expr) -> pl.Expr:
    """Whether some formula prices an op of this name (vectorised :func:`formula_for`)."""
    hit = name.is_in(list(FORMULAS))
    for pat, _ in PATTERN_FORMULAS:
        hit = hit | name.str.contains(pat)
    return hit


def canonical_name(name: pl.Expr) -> pl.Expr:
    """The name formulas are looked up by: engine wrapper serials stripped."""
    return name.str.replace(NAME_SERIAL_RE, "${1}")


def signature_cost(
    name: str, dims_json: str | None, types: list[str] | None, concrete: list[str] | None
) -> Cost | None:
    """FLOPs and minimum bytes of one call of ``name`` with these recorded inputs.

    Returns None when there is no formula for ``name`` or the recorded shapes do not determine
    the cost (e.g. traces without ``record_shapes``). Never raises on odd shapes.
    """
    f = formula_for(name)
    if f is None:
        return None
    args = parse_args(dims_json, types, concrete)
    if not args:
        return None
    try:
        return f(args)
    except Contradiction as exc:
        return Cost(0.0, 0.0, CONTRADICTION, None, 0, note=str(exc))
    except (NoModel, IndexError, TypeError, ValueError, ZeroDivisionError):
        return None
