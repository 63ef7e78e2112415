"""The project's module size rule: no tracekit/**/*.py file over 400 lines (counted as `wc -l`
counts them: newline characters). A module that grows past it is split into cohesive modules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def test_no_module_over_max_lines() -> None:
    files = sorted((ROOT / "tracekit").rglob("*.py"))
    assert len(files) > 100  # the tree was found
    counts = {p.relative_to(ROOT).as_posix(): p.read_bytes().count(b"\n") for p in files}
    over = {p: n for p, n in counts.items() if n > MAX_LINES}
    listing = ", ".join(f"{p} ({n} lines)" for p, n in sorted(over.items(), key=lambda kv: -kv[1]))
    assert not over, f"modules over {MAX_LINES} lines, split them: {listing}"
