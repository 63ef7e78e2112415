"""The house stays simple as it grows (issue 34 item 6): no function over 100 lines, at most 30 over
60, at most 80 imports inside functions (laziness only where it is measured to matter: the command
and format registries, the stored-result shortcut, optional extras). Counted from
the source with ``ast``, the way the issue counted them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "tracekit"


def counts(root: Path = ROOT) -> tuple[list[tuple[int, str]], int]:
    """(length and name of every function over 60 lines, function-local import statements)."""
    long: list[tuple[int, str]] = []
    local = 0
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if n > 60:
                    long.append((n, f"{path.relative_to(root)}:{fn.name}"))
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in seen:
                        seen.add(id(node))
                        local += 1
    return sorted(long, reverse=True), local


def test_no_function_over_100_lines_and_few_over_60() -> None:
    long, _ = counts()
    assert [x for x in long if x[0] > 100] == []
    assert len(long) <= 30, long


def test_few_imports_inside_functions() -> None:
    assert counts()[1] <= 80


def test_the_count_sees_a_planted_long_function_and_a_local_import(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    (tmp_path / "m.py").write_text(f"def f() -> None:\n    import os\n{body}\n")
    # 1 def line + 1 import + 70 assignments = 72 lines; one local import
    assert counts(tmp_path) == ([(72, "m.py:f")], 1)
