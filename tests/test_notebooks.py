"""The notebooks: stored *with* their outputs (readable on GitHub), public API only, and executed
again here so they cannot rot. `make notebooks` (notebooks/make_notebooks.py) rewrites them.
Executing all three takes about a minute on a quiet 2-core machine (tiny torch runs, 1 thread)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
PUBLIC = {"tracekit", "tracekit.analysis", "tracekit.report", "tracekit.hardware"}
IMPORT_RE = re.compile(r"^\s*(?:from\s+(tracekit[\w.]*)\s+import\s+([\w, ]+)|import\s+(tracekit[\w.]*))", re.M)


def test_there_are_notebooks() -> None:
    assert {p.stem for p in NOTEBOOKS} >= {"why_is_my_prefill_slow", "decode_at_growing_context", "phase_shape_sweep"}


def _read(path: Path):  # type: ignore[no-untyped-def]
    nbformat = pytest.importorskip("nbformat")
    return nbformat.read(path, as_version=4)


def imported_modules(source: str) -> set[str]:
    """tracekit modules a cell imports (``from tracekit import report`` counts as tracekit.report)."""
    out: set[str] = set()
    for m in IMPORT_RE.finditer(source):
        if m[3]:
            out.add(m[3])
        elif m[1] == "tracekit":
            out.update(f"tracekit.{n.strip()}" for n in m[2].split(",") if n.strip() not in ("load", "Trace"))
        else:
            out.add(m[1])
    return out


def test_import_check_catches_private_modules() -> None:
    assert imported_modules("from tracekit.report.formats.markdown import render") == {
        "tracekit.report.formats.markdown"
    }
    assert imported_modules("from tracekit import report, hardware\nimport tracekit") == {
        "tracekit.report",
        "tracekit.hardware",
        "tracekit",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_with_outputs_and_public_api_only(path: Path) -> None:
    nb = _read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "stored without running every cell"
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no plot stored"
    assert sum(1 for c in code if c.get("outputs")) >= len(code) - 1  # only the set-up cell prints nothing
    used = set().union(*(imported_modules(c.source) for c in code))
    assert used <= PUBLIC, f"private modules imported: {sorted(used - PUBLIC)}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("TRACEKIT_SHARED_TRACES", str(shared_traces))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = _read(path)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    text = "".join(str(o.get("text", "")) for o in outputs)
    assert "not GPU evidence" in text or path.stem == "why_is_my_prefill_slow"  # CPU runs say they are diagnostics


@pytest.mark.parametrize(
    ("stem", "effect"),
    [
        ("decode_at_growing_context", r"step time rises with context: median ([\d.]+) ms .* → ([\d.]+) ms"),
        ("phase_shape_sweep", r"throughput rises with rows: ([\d.]+) GFLOP/s at m=\d+ → ([\d.]+) GFLOP/s"),
    ],
)
def test_stored_outputs_teach_their_lesson(stem: str, effect: str) -> None:
    """Issue 27 item 9: the stored run shows its effect (a later figure above the first) or says the
    noise hid it — never a picture that contradicts the lesson without a word."""
    nb = _read(NOTEBOOKS[[p.stem for p in NOTEBOOKS].index(stem)])
    text = "".join(str(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    m = re.search(effect, text)
    if m is None:
        assert "NOISE HIDES THE EFFECT" in text, "neither the effect nor the noise warning is stored"
    else:
        assert float(m[2]) > float(m[1]), m[0]
