"""Format names only in tracekit/sources/ (issue 34 item 4): past the sources, code asks what a
trace's format records (tracekit/sources/protocol.py Capabilities) through the registry, never
which format it is."""

from __future__ import annotations

import ast
from pathlib import Path

import polars as pl

from tracekit.analysis.device_only import has_no_cpu_ops
from tracekit.sources import registry
from tracekit.sources.protocol import UNKNOWN, Capabilities

ROOT = Path(__file__).resolve().parent.parent / "tracekit"
FORMAT_NAMES = {s.name for s in registry.SOURCES}


def _format_branches(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracekit.sources."):
            if any(a.name == "NAME" for a in node.names):
                found.append(f"imports {node.module}'s NAME")
        if isinstance(node, ast.Compare):
            consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            hit = [c for c in consts if c in FORMAT_NAMES]
            if hit:
                found.append(f"compares with {hit}")
    return found


def test_no_format_name_past_the_sources() -> None:
    offenders = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "sources":
            continue
        found = _format_branches(ast.parse(path.read_text()))
        if found:
            offenders[str(rel)] = found
    assert offenders == {}


def test_a_planted_format_branch_is_caught() -> None:
    planted = 'from tracekit.sources.nsys import NAME as NSYS\nif doc["format"] == "nsys":\n    pass\n'
    assert len(_format_branches(ast.parse(planted))) == 2


def test_capabilities_by_format() -> None:
    kineto, nsys = registry.capabilities("kineto"), registry.capabilities("nsys")
    assert kineto.cpu_ops_with_device and kineto.writes_labels and not kineto.shapes_from_annotations
    assert nsys.shapes_from_annotations and not nsys.cpu_ops_with_device and not nsys.writes_labels
    assert registry.capabilities("dataset") == UNKNOWN == registry.capabilities(None) == Capabilities()


def test_device_only_asks_the_capability() -> None:
    # 2 kernels and not one op: a format that records ops beside kernels was recorded without them
    # (the device-only hint), one whose ops come from annotations keeps the generic reason.
    acts = pl.DataFrame({"act_id": [0, 1]})
    costs = pl.DataFrame({"op_id": []}, schema={"op_id": pl.Int64})
    assert has_no_cpu_ops(costs, acts, False, registry.capabilities("kineto"))
    assert not has_no_cpu_ops(costs, acts, False, registry.capabilities("nsys"))
    assert not has_no_cpu_ops(costs, acts, True, registry.capabilities("kineto"))  # a CPU-only trace
