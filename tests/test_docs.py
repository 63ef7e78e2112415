"""BENCHMARKS.md stays a page of current figures (issue 34 item 7): at most 300 lines, and no
heading that dates a section or names the session or issue that measured it (history is in git,
`git log -p BENCHMARKS.md`). A re-measured figure replaces the old one instead of adding a section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 300
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
DATED = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"  # 2026-12-05
    r"|\b\d{1,2}:\d{2}\b"  # 02:16 (a time of day)
    r"|\bUTC\b"
    rf"|\b(?:{_MONTHS})\b"
    r"|\b(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?\s+\d{1,2}\b"  # Dec 5
    r"|\bsessions?\b"  # "This session", "session 8"
    r"|\bissues?\s+\d+",  # "issue 28", "issues 3, 15"
    re.IGNORECASE,
)


def dated_headings(text: str) -> list[str]:
    """The Markdown headings of ``text`` that carry a date, a time, a session or an issue number."""
    return [line for line in text.splitlines() if line.startswith("#") and DATED.search(line)]


def test_benchmarks_is_at_most_300_lines() -> None:
    lines = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"BENCHMARKS.md has {len(lines)} lines: replace figures, do not add sections"


def test_benchmarks_headings_are_not_dated() -> None:
    assert dated_headings((REPO / "BENCHMARKS.md").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "heading",
    [  # headings the page had before this test (git show afab86a:BENCHMARKS.md)
        "## This session (issue 25: the house moved; issues 26–30 merged), 2026-12-05 00:15–00:35 UTC",
        "## Start-up, small traces, ingest against json.load and HTA (session 8, 2026-12-02 06:30–06:55 UTC)",
        "## The 860 MB replica (session 8)",
        "## Reports (issue 6)",
        "### Measured on 5 December",
        "## Ingest, Dec 5",
    ],
)
def test_a_dated_heading_is_caught(heading: str) -> None:
    assert dated_headings(f"# Benchmarks\n\ntext of 2026-12-05\n\n{heading}\n") == [heading]


def test_current_headings_pass() -> None:
    text = "# Benchmarks\n## The 860 MB replica\n## Ranks on Dask (quiet machine)\n### Targets: 10× HTA\n"
    assert dated_headings(text) == []


def _tree_block() -> str:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    return doc[doc.index("## The tree") : doc.index("Where a new thing goes")]


def unnamed_modules(tree: str, root: Path = REPO / "tracekit") -> list[str]:
    """The modules under ``root`` whose name the architecture page's tree does not mention."""
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*.py"))
        if p.name != "__init__.py" and not re.search(rf"(?<![\w.]){re.escape(p.stem)}(?![\w])", tree)
    ]


def test_architecture_names_every_module() -> None:
    # docs/architecture.md's tree names every module (issue 34 item 7): a module added without a
    # line there fails here.
    assert unnamed_modules(_tree_block()) == []


def test_an_unnamed_module_is_caught(tmp_path: Path) -> None:
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "steps.py").write_text("")
    (tmp_path / "analysis" / "hidden_thing.py").write_text("")
    assert unnamed_modules("analysis/  steps (the steps)", tmp_path) == ["analysis/hidden_thing.py"]


def test_architecture_says_where_each_new_thing_goes() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    where = doc[doc.index("Where a new thing goes") :].split("\n\n")[0]
    for thing in ("format", "FLOPs", "step", "section", "plot", "command"):
        assert thing in where, thing
