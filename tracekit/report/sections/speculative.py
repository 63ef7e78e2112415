"""The "Speculative decoding" block: per phase, draft and verify time and share, verify steps,
tokens per verify step and their part of TPOT (tracekit/analysis/serving/speculative.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import Document, Section, Table

TITLE = "Speculative decoding (draft and verify)"
HEADERS = [
    "phase",
    "verify steps",
    "verify time",
    "verify %",
    "draft regions",
    "draft time",
    "draft %",
    "tokens / verify",
    "TPOT: verify",
    "TPOT: draft",
]


def rows_of(totals: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The speculative rows of an analysis document's totals (``serving.speculative``), else []."""
    serving = (totals or {}).get("serving") if isinstance(totals, Mapping) else None
    rows = serving.get("speculative") if isinstance(serving, Mapping) else None
    return [r for r in rows or [] if isinstance(r, Mapping)]


def speculative(d: Document) -> Section | None:
    """Draft and verify, one row per phase (``totals.serving.speculative``); none without speculative steps."""
    rows = rows_of(d.doc["totals"])
    body = [
        [
            str(r.get("phase")),
            fmt.count(r.get("verify_steps")),
            fmt.value("busy_ns", r.get("verify_ns")),
            fmt.percent(r.get("verify_share")),
            fmt.count(r.get("draft_regions")),
            fmt.value("busy_ns", r.get("draft_ns")),
            fmt.percent(r.get("draft_share")),
            fmt.value("tokens", r.get("tokens_per_verify")),
            fmt.value("tpot_p50_ms", r.get("tpot_verify_ms")),
            fmt.value("tpot_p50_ms", r.get("tpot_draft_ms")),
        ]
        for r in rows
    ]
    return Section(TITLE, tables=[Table(HEADERS, body)], anchor="speculative") if rows else None
