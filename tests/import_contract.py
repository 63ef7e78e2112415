"""The import contract read from the source itself (docs/architecture.md, "The contract").

import-linter (``lint-imports`` in .ci/run) sees ``import`` statements only. This reader also sees
the ways around them: an attribute path through the package root (``import tracekit`` then
``tracekit.report.fmt``, or through an alias: ``import tracekit as tk`` then ``tk.report.fmt``),
``getattr(tracekit, "report")`` and ``importlib.import_module`` / ``__import__`` with a literal name,
a dotted module name written as a string (a list of modules to import later), and any by-name import
whose name is not a literal, a ``getattr`` on a tracekit module included (refused: pass a callback
down instead). The layers are the ones
``[tool.importlinter]`` in pyproject.toml declares; ``tracekit.workloads`` (the top-level
workloads/ folder) may import only the bottom layers (annotate, conventions, errors) and itself.

Besides the layers: no module imports a ``_private`` name of another module, and the module graph
(every import, lazy ones included) has no cycle.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

WORKLOADS = "tracekit.workloads"
WORKLOADS_MAY_IMPORT = ("tracekit.annotate", "tracekit.conventions", "tracekit.errors", WORKLOADS)
# The only modules that may import by a name that is not a literal: the root package (its lazy
# re-exports) and the command registry (the top layer: nothing is above it).
DYNAMIC_ALLOWED = ("tracekit", "tracekit.cli.main")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    line: int
    target: str  # the imported module (or "<dynamic>")
    how: str  # "import", "from", "attribute", "getattr", "import_module", "string"
    names: tuple[str, ...] = ()  # for "from": the names taken


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name → file, for tracekit/ and workloads/ (installed as tracekit.workloads)."""
    out: dict[str, Path] = {}
    for base, prefix in ((root / "tracekit", "tracekit"), (root / "workloads", WORKLOADS)):
        for p in sorted(base.rglob("*.py")):
            parts = list(p.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = p
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a known module or package."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in known:
            return cand
    return None


def _attribute_path(node: ast.expr, names: dict[str, str]) -> str | None:
    """The dotted module path an expression names, when it starts at a name bound to a tracekit
    module (``names``: ``tracekit`` and the aliases of ``import tracekit… as x``), else None."""
    parts: list[str] = []
    cur = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if isinstance(cur, ast.Name) and cur.id in names:
        return ".".join([names[cur.id], *reversed(parts)])
    return None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    # the names bound to a tracekit module: the root package, and every alias of an imported one
    names = {"tracekit": "tracekit"} | {
        a.asname: a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
        if a.asname and a.name.split(".")[0] == "tracekit"
    }
    out: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("tracekit"):
                    tgt = _resolve(a.name, known)
                    out.append(Import(name, node.lineno, tgt or a.name, "import"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if not base.startswith("tracekit"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in known:  # a module taken from its package
                    out.append(Import(name, node.lineno, sub, "from"))
                else:
                    out.append(Import(name, node.lineno, _resolve(base, known) or base, "from", (a.name,)))
        elif isinstance(node, ast.Attribute):
            dotted = _attribute_path(node, names)
            if dotted and "." in dotted:
                tgt = _resolve(dotted, known)
                if tgt and tgt != "tracekit":
                    out.append(Import(name, node.lineno, tgt, "attribute"))
        elif isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if fname in ("import_module", "__import__"):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.append(Import(name, node.lineno, _resolve(arg.value, known) or arg.value, "import_module"))
                else:
                    out.append(Import(name, node.lineno, "<dynamic>", "import_module"))
            elif fname == "getattr" and len(node.args) >= 2 and (owner := _attribute_path(node.args[0], names)):
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    tgt = _resolve(f"{owner}.{arg.value}", known)
                    if tgt and tgt != "tracekit":
                        out.append(Import(name, node.lineno, tgt, "getattr"))
                else:
                    out.append(Import(name, node.lineno, "<dynamic>", "getattr"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            v = node.value
            if v.startswith("tracekit.") and " " not in v and v in known:
                out.append(Import(name, node.lineno, v, "string"))
    return out


def _extension(root: Path, package: str, name: str) -> bool:
    """Whether ``package.name`` is a compiled extension module (its C source in the package's tree)."""
    folder = root.joinpath(*package.split("."))
    return folder.is_dir() and any(folder.rglob(f"{name}.c"))


def layers(root: Path) -> list[list[list[str]]]:
    """pyproject's layers, top first: each layer a list of sibling groups (``|`` separates
    independent groups, ``:`` siblings that may import each other); parentheses dropped."""
    cfg = tomllib.loads((root / "pyproject.toml").read_text())
    spec = next(c for c in cfg["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    out = []
    for entry in spec:
        groups = []
        for g in entry.split("|"):
            groups.append([m.strip().strip("()").strip() for m in g.split(":")])
        out.append(groups)
    return out


def _place(mod: str, lay: list[list[list[str]]]) -> tuple[int, int] | None:
    best: tuple[int, int, int] | None = None
    for i, groups in enumerate(lay):
        for j, group in enumerate(groups):
            for m in group:
                if (mod == m or mod.startswith(m + ".")) and (best is None or len(m) > best[2]):
                    best = (i, j, len(m))
    return None if best is None else (best[0], best[1])


def violations(root: Path) -> list[str]:
    known = modules(root)
    lay = layers(root)
    found: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in known}
    for mod, path in known.items():
        rel = path.relative_to(root).as_posix()
        for imp in imports_of(mod, path, known):
            where = f"{rel}:{imp.line}"
            if imp.target == "<dynamic>":
                if mod in DYNAMIC_ALLOWED:
                    continue
                found.append(f"{where}: a module imported by a name that is not a literal (pass a callback instead)")
                continue
            tgt = imp.target
            if tgt not in known:
                continue
            if tgt != mod:
                graph[mod].add(tgt)
            for n in imp.names:
                if n.startswith("_") and not n.startswith("__") and tgt != mod and not _extension(root, tgt, n):
                    found.append(f"{where}: imports the private name {n} of {tgt}")
            if mod == "tracekit":
                continue  # the root package re-exports lazily
            if mod.startswith(WORKLOADS):
                if not any(tgt == m or tgt.startswith(m + ".") for m in WORKLOADS_MAY_IMPORT):
                    found.append(f"{where}: workloads/ imports {tgt} ({imp.how}); it may import only layer 0")
                continue
            a, b = _place(mod, lay), _place(tgt, lay)
            if a is None or b is None:
                continue
            if b[0] < a[0]:
                found.append(f"{where}: {mod} imports {tgt} from a higher layer ({imp.how})")
            elif b[0] == a[0] and b[1] != a[1]:
                found.append(f"{where}: {mod} imports its independent sibling {tgt} ({imp.how})")
    found += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each as a
    sorted list, plus the package ``__init__`` edges left out (a package importing its own modules
    and a module importing its package's ``__init__`` is how packages re-export)."""
    edges = {m: {t for t in ts if not (m.startswith(t + ".") or t.startswith(m + "."))} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in edges:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out
