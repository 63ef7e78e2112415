"""Operator inputs as the cost model sees them: Kineto ``Input type`` → canonical dtype and
element size, parsed argument lists (:class:`Arg`), the :class:`Cost` result, and the small shape
helpers the formulas share (broadcasting, type promotion). Pure Python, no polars, no torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

# ---------------------------------------------------------------- dtypes and element sizes
# Kineto "Input type" string -> (canonical dtype, bytes per element).
DTYPES: Final[dict[str, tuple[str, float]]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8_e4m3", 1),
    "c10::Float8_e4m3fnuz": ("fp8_e4m3", 1),
    "c10::Float8_e5m2": ("fp8_e5m2", 1),
    "c10::Float8_e5m2fnuz": ("fp8_e5m2", 1),
    "c10::Float8_e8m0fnu": ("fp8_e8m0", 1),
    # two e2m1 values per byte; the traced shape counts the packed bytes, so 1 byte per shape element
    "c10::Float4_e2m1fn_x2": ("fp4_e2m1", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "short int": ("int16", 2),
    "int": ("int32", 4),
    "unsigned int": ("uint32", 4),
    "long int": ("int64", 8),
    "long long int": ("int64", 8),
    "unsigned long": ("uint64", 8),
    "bool": ("bool", 1),
    "c10::complex<c10::Half>": ("complex32", 4),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}
# Used when a TensorList hides its element type (Kineto writes just "TensorList").
INDEX_DTYPE: Final = ("int64", 8.0)
# An op computes at its widest float input: W4A16 / W8A16 (packed weights, bf16 activations) is a
# bf16 op read at its packed weights' bytes; an fp8 x fp8 scaled_mm is an fp8 op.
_FLOAT_RANK: Final = {"fp64": 5, "fp32": 4, "fp16": 3, "bf16": 3, "fp8_e4m3": 2, "fp8_e5m2": 2, "fp4_e2m1": 1}

# Priority classes: a costed op whose descendant has a model of the same or higher class defers
# to it (counted_in_child); a lower-class descendant of a costed op defers to that ancestor.
RANK_MATMUL: Final = 3
RANK_NORM: Final = 2
RANK_ELEMENTWISE: Final = 1


@dataclass(frozen=True)
class Cost:
    """Result for one signature. ``unknown_elems``: elements moved whose size the trace hides
    (TensorList inputs); :mod:`tracekit.costmodel.ops` prices them at the table's dominant dtype."""

    flops: float
    bytes: float
    model: str
    dtype: str | None
    rank: int
    unknown_elems: float = 0.0
    note: str | None = None


@dataclass(frozen=True)
class Arg:
    """One operator argument as Kineto recorded it."""

    dims: list[Any]  # [] for scalars/None, [d0, d1, ...] for tensors, [[...], ...] for TensorList
    type: str
    concrete: str

    @property
    def is_tensor(self) -> bool:
        return self.type in DTYPES

    @property
    def is_list(self) -> bool:
        return self.type == "TensorList" or (bool(self.dims) and isinstance(self.dims[0], list))

    @property
    def numel(self) -> float:
        return float(math.prod(self.dims)) if self.is_tensor else 0.0

    @property
    def size(self) -> float:
        return DTYPES[self.type][1] if self.is_tensor else 0.0

    @property
    def nbytes(self) -> float:
        return self.numel * self.size

    @property
    def dtype(self) -> str | None:
        return DTYPES[self.type][0] if self.is_tensor else None


class NoModel(Exception):
    """Raised inside a formula when the shapes do not allow a cost (becomes a null cost)."""


def parse_args(dims_json: str | None, types: list[str] | None, concrete: list[str] | None) -> list[Arg]:
    """Zip Input Dims (JSON text), Input type and Concrete Inputs into :class:`Arg` objects."""
    try:
        dims = json.loads(dims_json) if dims_json else []
    except ValueError:
        dims = []
    if not isinstance(dims, list):
        dims = []
    types = list(types or [])
    concrete = list(concrete or [])
    n = max(len(dims), len(types), len(concrete))
    out = []
    for i in range(n):
        d = dims[i] if i < len(dims) and isinstance(dims[i], list) else []
        out.append(Arg(d, types[i] if i < len(types) else "", concrete[i] if i < len(concrete) else ""))
    return out


def tensors(args: list[Arg]) -> list[Arg]:
    return [a for a in args if a.is_tensor]


def need(args: list[Arg], n: int) -> list[Arg]:
    t = tensors(args)
    if len(t) < n:
        raise NoModel(f"needs {n} typed tensor inputs")
    return t


def flag(args: list[Arg], i: int) -> bool:
    return i < len(args) and args[i].concrete.strip().lower() in ("true", "1")


def int_at(args: list[Arg], i: int) -> int | None:
    try:
        return int(float(args[i].concrete)) if i < len(args) and args[i].concrete != "" else None
    except ValueError:
        return None


def broadcast(shapes: list[list[int]]) -> list[int]:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s):
            j = nd - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                raise NoModel(f"shapes {shapes} do not broadcast")
    return out


def promote(args: list[Arg]) -> Arg:
    """The tensor argument whose dtype is the result dtype: the widest float among tensors with
    dimensions (0-d tensors, like Python scalars, do not widen the result in PyTorch's type
    promotion within a category), else the first tensor."""
    t = tensors(args)
    dimensioned = [a for a in t if a.dims] or t
    return max(dimensioned, key=lambda a: _FLOAT_RANK.get(a.dtype or "", 0))
