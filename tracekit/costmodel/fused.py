"""Inductor/Triton fused kernels recorded as ops (``triton_poi_fused_*``, ``triton_red_fused_*``,
``triton_per_fused_*``): priced by their traffic (docs/costmodel.md, "Fused kernels").

Each recorded tensor argument is read or written once, except a buffer the kernel both reads and
writes. Inductor passes such a buffer once (an ``in_out_ptr`` argument: an input whose storage
is reused for the output), so the recorded arguments undercount the operands. For a pointwise
kernel the name says how many operands there are at least: Inductor names the kernel after the
ATen ops it fused (``triton_poi_fused__unsafe_view_mul_silu_2``: ``_unsafe_view``, ``mul``,
``silu``, serial 2). A binary op (``mul``, ``add``, …) reads two inputs and every pointwise
kernel writes one output, so with a binary op at least three operands, else at least two. The
recorded tensors supply one operand each, or k when a tensor holds k times the kernel's element
count (``xnumel``: two halves of one buffer read as two operands); when they supply fewer than
the name implies, the first one with the element count (Inductor puts ``in_out_ptr`` arguments
first) is read and written: counted twice.

A gather kernel (a pointwise kernel named after ``embedding``, ``index``, ``index_select`` or
``gather``, or named by its serial alone, that takes an int32/int64 index tensor) loads one table
element per element it writes: a table larger than the kernel's element count is read at the rows taken (the element
count × the table's element size), not whole.

FLOPs stay 0: the name lists each fused op once however often the body applies it, and not
whether an operand is a Python scalar, so a count from it would be a guess; pointwise kernels are
priced by the bytes they move.
"""

from __future__ import annotations

import re
from typing import Callable, Final

from tracekit.costmodel.args import RANK_ELEMENTWISE, Arg, Cost, NoModel, int_at, tensors

PATTERN: Final = r"^triton_(poi|red|per)_fused"
_NAME_RE: Final = re.compile(r"^triton_(poi|red|per)_fused_?(.*?)(?:_\d+)?$")
# Fused ATen ops that read two tensors (one output).
_BINARY: Final = frozenset(
    (
        "add",
        "sub",
        "mul",
        "div",
        "rsub",
        "maximum",
        "minimum",
        "where",
        "addcmul",
        "addcdiv",
        "lerp",
        "atan2",
        "fmod",
        "remainder",
        "hypot",
        "copysign",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    )
)
# Fused ATen ops that create a tensor without reading one: the recorded buffer may be output only.
_GENERATORS: Final = frozenset(
    ("zeros", "ones", "full", "fill", "arange", "empty", "rand", "randn", "randint", "bernoulli", "scalar", "iota")
)


def implied_operands(name: str) -> int | None:
    """The fewest distinct operands (inputs + the output) a pointwise kernel of this name moves:
    3 with a binary op in the name, else 2; None when the rule does not apply (reduction kernels,
    whose in-out buffer is the reduced one and cannot be told from the name; kernels that generate
    values without reading, e.g. ``zeros``; names not from Inductor)."""
    m = _NAME_RE.match(name)
    if m is None or m.group(1) != "poi":
        return None
    # ops whose names hold an underscore are read whole first (``masked_fill`` is no ``fill``)
    body = re.sub(r"(?:^|(?<=_))masked_fill(?=_|$)", "mul", m.group(2))
    tokens = set(body.split("_"))
    if tokens & _GENERATORS:
        return None
    return 3 if tokens & _BINARY else 2


# Fused ATen ops that load a table at indices: one table element per element written.
_GATHERS: Final = frozenset(("embedding", "index", "select", "gather"))
_INDEX_DTYPES: Final = frozenset(("int32", "int64"))


def _element_count(args: list[Arg], tensors: list[Arg], default: float | None = None) -> float:
    """The elements a pointwise kernel walks: its ``xnumel``, the largest integer scalar argument
    equal to some tensor's element count (sizes such as ``ks0`` come before it with dynamic
    shapes); else ``default``, else the largest tensor's count."""
    numels = {a.numel for a in tensors}
    ints = [int_at(args, i) for i, a in enumerate(args) if a.type == "Scalar" and a.concrete.strip().isdigit()]
    hits = [float(v) for v in ints if v is not None and float(v) in numels]
    return max(hits) if hits else (default if default is not None else max(numels))


def is_gather(name: str, t: list[Arg]) -> bool:
    """A pointwise kernel that loads a table at indices: it takes an integer tensor and its name
    holds a gather op (``triton_poi_fused_embedding_0``, ``…_index_select_…``) or no op at all
    (``triton_poi_fused_0``: Inductor names a kernel whose nodes carry no ATen origin by its serial
    alone — vLLM's compiled embedding + rotary lookup is one)."""
    m = _NAME_RE.match(name)
    if m is None or m.group(1) != "poi":
        return False
    ops = {x for x in m.group(2).split("_") if x and not x.isdigit()}
    if ops and not ops & _GATHERS:
        return False
    return any(a.dtype in _INDEX_DTYPES for a in t)


def _gather_bytes(args: list[Arg], t: list[Arg]) -> float:
    """Each tensor once, a table (a non-index tensor larger than the element count) at the rows
    taken: the index's length × its row (the table's elements over its first dim), at most the
    element count × its element size. The element count is ``xnumel``, else the output's (Inductor
    records ``out_ptr`` arguments last)."""
    full = _element_count(args, t, default=t[-1].numel)
    idx = max((a.numel for a in t if a.dtype in _INDEX_DTYPES), default=0.0)

    def read(a: Arg) -> float:
        if a.numel <= full or a.dtype in _INDEX_DTYPES:
            return a.nbytes
        row = a.numel / a.dims[0] if a.dims and not a.is_list and a.dims[0] else a.numel
        return min(full, idx * row) * a.size

    return sum(read(a) for a in t)


def fused_kernel(name: str) -> Callable[[list[Arg]], Cost]:
    """The formula for the fused kernel ``name`` (its name is an input: see the module doc)."""

    def f(args: list[Arg]) -> Cost:
        t = tensors(args)
        if not t:
            raise NoModel("fused kernel without tensor arguments")
        dtype = max(t, key=lambda a: a.numel).dtype
        if is_gather(name, t):
            return Cost(0.0, _gather_bytes(args, t), "fused_gather", dtype, RANK_ELEMENTWISE)
        nbytes = sum(a.nbytes for a in t)
        need = implied_operands(name)
        full = _element_count(args, t)
        # a tensor of k × the element count supplies k operands (e.g. gate and up read from one
        # [T, 2·D] buffer by silu(gate)·up over T·D elements)
        slots = sum(max(1, int(a.numel // full)) for a in t) if full > 0 else len(t)
        if need is not None and slots < need:
            # the read-and-written buffer is the output, so it has the element count
            inout = next((a for a in t if a.numel == full), None)
            if inout is not None:
                nbytes += inout.nbytes
        return Cost(0.0, nbytes, "fused_pointwise", dtype, RANK_ELEMENTWISE)

    return f
