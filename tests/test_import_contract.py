"""The import contract, read from the source (tests/import_contract.py; docs/architecture.md, "The
contract"): the tree keeps it, and each way around import-linter that a planted file tries is
caught — an upward import through the package root (or an alias of it, or ``getattr`` on it),
``importlib.import_module`` of an upper layer,
a module name kept as a string for later, a by-name import of a name that is not a literal,
workloads/ reaching past layer 0, a ``_private`` name taken from another module, an import cycle."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from import_contract import violations

ROOT = Path(__file__).resolve().parent.parent


def test_the_tree_keeps_the_contract() -> None:
    assert violations(ROOT) == []


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sources and pyproject.toml, clean (no violation), to plant files into."""
    root = tmp_path_factory.mktemp("tree")
    for d in ("tracekit", "workloads"):
        shutil.copytree(ROOT / d, root / d, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


PLANTED = {
    # sources/ (layer 2) reaching the report (layer 5) through the package root
    "root attribute": (
        "tracekit/sources/planted.py",
        "import tracekit\n\n\ndef f() -> object:\n    return tracekit.report.fmt.plain(1.0)\n",
        "tracekit.sources.planted imports tracekit.report.fmt from a higher layer (attribute)",
    ),
    "an alias of the package": (
        "tracekit/sources/planted.py",
        "import tracekit as tk\n\n\ndef f() -> object:\n    return tk.report.fmt.plain(1.0)\n",
        "tracekit.sources.planted imports tracekit.report.fmt from a higher layer (attribute)",
    ),
    "getattr literal": (
        "tracekit/sources/planted.py",
        'import tracekit\n\n\ndef f() -> object:\n    return getattr(tracekit, "report")\n',
        "tracekit.sources.planted imports tracekit.report from a higher layer (getattr)",
    ),
    "getattr through an alias": (
        "tracekit/sources/planted.py",
        'import tracekit as tk\n\n\ndef f() -> object:\n    return getattr(tk.report, "fmt")\n',
        "tracekit.sources.planted imports tracekit.report.fmt from a higher layer (getattr)",
    ),
    "getattr not a literal": (
        "tracekit/sources/planted.py",
        "import tracekit\n\n\ndef f(name: str) -> object:\n    return getattr(tracekit, name)\n",
        "a module imported by a name that is not a literal",
    ),
    "import_module literal": (
        "tracekit/sources/planted.py",
        'import importlib\n\nimportlib.import_module("tracekit.cli.main")\n',
        "tracekit.sources.planted imports tracekit.cli.main from a higher layer (import_module)",
    ),
    "__import__": (
        "tracekit/tables/planted.py",
        '__import__("tracekit.analysis.pipeline")\n',
        "tracekit.tables.planted imports tracekit.analysis.pipeline from a higher layer (import_module)",
    ),
    "a name for later": (
        "tracekit/costmodel/planted.py",
        'LATER = ("tracekit.report.formats.html",)\n',
        "tracekit.costmodel.planted imports tracekit.report.formats.html from a higher layer (string)",
    ),
    "not a literal": (
        "tracekit/sources/planted.py",
        'import importlib\n\nNAME = "tracekit." + "cli"\nimportlib.import_module(NAME)\n',
        "a module imported by a name that is not a literal",
    ),
    "independent sibling": (
        "tracekit/costmodel/planted.py",
        "from tracekit.hardware import peaks\n",
        "tracekit.costmodel.planted imports its independent sibling tracekit.hardware.peaks (from)",
    ),
    "workloads past layer 0": (
        "workloads/planted.py",
        "from tracekit.analysis import pipeline\n",
        "workloads/ imports tracekit.analysis.pipeline (from); it may import only layer 0",
    ),
    "private name": (
        "tracekit/report/planted.py",
        "from tracekit.numbers import _SI\n",
        "imports the private name _SI of tracekit.numbers",
    ),
    "cycle": (
        "tracekit/tables/planted.py",
        "from tracekit.tables import planted_too\n",
        "import cycle: tracekit.tables.planted -> tracekit.tables.planted_too",
    ),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_way_around_is_caught(tree: Path, case: str) -> None:
    rel, text, expected = PLANTED[case]
    path = tree / rel
    extra = tree / "tracekit/tables/planted_too.py"
    path.write_text(text)
    if case == "cycle":
        extra.write_text("from tracekit.tables import planted\n")
    try:
        found = violations(tree)
    finally:
        path.unlink()
        extra.unlink(missing_ok=True)
    assert any(expected in v for v in found), found
    # and nothing else: the copy was clean, so every violation names the planted file
    assert all("planted" in v for v in found), found


def test_the_allowed_forms_pass(tree: Path) -> None:
    """A lower layer (by name, through an alias, by ``getattr``), a same-layer group member, the
    root package's lazy re-exports, ``getattr`` on a non-module and a compiled extension's private
    module name are not violations."""
    path = tree / "tracekit/report/planted.py"
    path.write_text(
        "import importlib\n\nimport tracekit\nimport tracekit as tk\nfrom tracekit.analysis import pipeline\n"
        "from tracekit.tables.schema import TABLES\n\n\n"
        "def f(o: object, name: str) -> object:\n"
        '    return tracekit.tables.schema, tk.analysis, getattr(tk, "tables"), getattr(o, name), pipeline, TABLES\n'
    )
    try:
        assert violations(tree) == []
    finally:
        path.unlink()
