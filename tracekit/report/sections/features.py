"""The "Features" block: what a run had switched on (tracekit/analysis/features.py), one row per
feature; for a diff, both sides side by side with the differences marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracekit.report.sections.blocks import Document, Section, Table

TITLE = "Features (what must match before two runs are compared)"


def rows_of(totals: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The feature rows of an analysis document's totals (empty for a result without them)."""
    rows = (totals or {}).get("features") if isinstance(totals, Mapping) else None
    return [r for r in rows or [] if isinstance(r, Mapping)]


def features(d: Document) -> Section | None:
    """What the run had switched on (``totals.features``): feature, state, evidence; none without them."""
    body = [[str(r.get("feature")), str(r.get("state")), str(r.get("detail") or "")] for r in rows_of(d.doc["totals"])]
    return Section(TITLE, tables=[Table(["feature", "state", "evidence"], body)], anchor="features") if body else None


def features_pair_table(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> Table:
    """Both runs' features side by side; ``DIFFERS`` where both are known and not equal."""
    from tracekit.analysis.features import UNKNOWN  # polars: the analyze screen imports this module

    sb = {str(r.get("feature")): r for r in b}
    body = []
    for r in a:
        f = str(r.get("feature"))
        s, o = str(r.get("state")), sb.get(f)
        t = str(o.get("state")) if o is not None else UNKNOWN
        mark = "DIFFERS" if UNKNOWN not in (s, t) and s != t else ""
        body.append([f, s, t, mark])
    seen = {str(r.get("feature")) for r in a}
    body += [[str(r.get("feature")), UNKNOWN, str(r.get("state")), ""] for r in b if str(r.get("feature")) not in seen]
    return Table(["feature", "A", "B", ""], body, "features")
