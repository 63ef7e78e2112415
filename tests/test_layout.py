"""The package layout: every folder of tracekit/ with an __init__.py is installed (pyproject lists
packages explicitly because workloads/ is mapped to tracekit.workloads), and nothing is installed
as a generic top-level ``workloads`` package."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "tracekit").rglob("__init__.py")}
    assert found - listed == set(), f"add these packages to [tool.setuptools] packages: {sorted(found - listed)}"
    assert cfg["package-dir"]["tracekit.workloads"] == "workloads"
    assert not any(p == "workloads" or p.startswith("workloads.") for p in listed)
