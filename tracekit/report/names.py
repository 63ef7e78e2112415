"""Readable short forms of kernel and operator names (the full name stays on hover / in details).

Demangled CUDA kernel names are C++ templates up to a few thousand characters long:
``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>,
std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)``.
:func:`short_name` keeps what tells kernels apart and drops the rest:

1. the return type (``void``) and the parameter list ``(...)`` go;
2. namespaces go (``at::native::``, ``(anonymous namespace)::``, ``<unnamed>::``), except before a
   generic name such as ``cutlass::Kernel2``;
3. template arguments stay two levels deep, each reduced the same way; a lambda or function
   argument becomes the name of the function it came from (``direct_copy_kernel_cuda``), C-style
   casts (``(int)4``) lose the cast, arguments three levels deep become ``…`` and arguments that
   only describe memory access (``std::array``, offset calculators) are dropped;
4. the result is cut to ``width`` characters with ``…``.

The function is pure text processing; it never changes what a name refers to in a table (the
renderers show the full name on hover in HTML and in a details list in Markdown).
"""

from __future__ import annotations

import re

WIDTH = 60
_GENERIC = re.compile(r"^(Kernel\d*|kernel\d*|device_kernel|global_kernel)$")
_CAST = re.compile(r"^\((?:unsigned |signed )?[A-Za-z_][\w ]*\)\s*")
# template arguments that only say how memory is walked; they tell no two kernels apart
_NOISE = {
    "array",
    "Array",
    "TrivialOffsetCalculator",
    "OffsetCalculator",
    "LoadWithoutCast",
    "StoreWithoutCast",
    "LoadWithCast",
    "StoreWithCast",
}
_ANON = re.compile(r"\((?:anonymous namespace)\)::|<unnamed>::|\{anonymous\}::")


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside <>, () and []."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def _head(s: str) -> tuple[str, str | None]:
    """``ns::name<args>(params)::more`` → (``ns::name``, ``args``) — the first top-level template."""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "(" and depth == 0 and i > 0:
            return s[:i], None
        if ch == "<":
            if depth == 0:
                # find the matching '>'
                d = 0
                for j in range(i, len(s)):
                    if s[j] == "<":
                        d += 1
                    elif s[j] == ">":
                        d -= 1
                        if d == 0:
                            return s[:i], s[i + 1 : j]
                return s[:i], s[i + 1 :]
            depth += 1
        elif ch == ">":
            depth -= 1
    return s, None


def _last(name: str) -> str:
    parts = [p for p in name.split("::") if p]
    if not parts:
        return name
    if _GENERIC.match(parts[-1]) and len(parts) > 1:
        return "::".join(parts[-2:])
    return parts[-1]


def _reduce(expr: str, level: int) -> str:
    e = _CAST.sub("", expr.strip())
    e = re.sub(r"^(?:void|const|struct|class|typename)\s+", "", e)
    if re.fullmatch(r"-?\d+[uUlL]*", e):
        return e.rstrip("uUlL")
    name, args = _head(e)
    base = _last(name.strip()) or name.strip()
    if args is None:
        return base
    if level >= 2:
        return f"{base}<…>"
    parts = [_reduce(a, level + 1) for a in _split_top(args)]
    inner = ", ".join(p for p in parts if p.split("<", 1)[0] not in _NOISE)
    return f"{base}<{inner}>" if inner else base


def short_name(name: str, width: int = WIDTH) -> str:
    """A readable form of a (kernel / operator) name of at most ``width`` characters; names that
    fit already are returned as they are (whitespace runs collapsed)."""
    s = " ".join(str(name).split())
    if len(s) <= width:
        return s
    s = _ANON.sub("", s)
    s = re.sub(r"^(?:void|static|__global__)\s+", "", s)
    templated = "<" in s or "(" in s
    out = _reduce(s, 0) if templated and re.match(r"[A-Za-z_~:]", s) else s  # plain long names are only cut
    if len(out) > width:
        out = out[: width - 1].rstrip(", ") + "…"
    return out or s[:width]


def cut_name(name: str, width: int = WIDTH) -> str:
    """``name`` cut to ``width`` characters with an ellipsis, otherwise unchanged (for names the
    user wrote, such as annotations, which are never rewritten)."""
    s = " ".join(str(name).split())
    return s if len(s) <= width else s[: width - 1] + "…"
