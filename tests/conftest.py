"""Shared fixtures. Real traces live beside the checkout in ../shared/traces (CI has them too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("TRACEKIT_SHARED_TRACES", REPO.parent / "shared" / "traces"))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """Path of the shared real traces; the suite fails loudly (not skips) when they are missing."""
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"shared traces not found at {SHARED_TRACES} (set TRACEKIT_SHARED_TRACES)")
    return SHARED_TRACES


def kineto_trace_files() -> list[Path]:
    """Every Kineto trace in the shared folder (for invariant tests over all of them)."""
    return sorted((SHARED_TRACES / "kineto").rglob("*.json.gz"))


def nsys_export_files() -> list[Path]:
    return sorted((SHARED_TRACES / "nsys").rglob("*.sqlite"))


TORCH_MISSING = "needs the workloads extra (torch): pip install -e '.[workloads]'"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``torch`` are skipped with the reason when torch is not installed (pytest without
    the workloads extra still runs everything else); ``-m 'not slow'`` leaves the slow ones out."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason=TORCH_MISSING)
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)
