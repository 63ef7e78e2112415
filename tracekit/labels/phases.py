"""Phase naming conventions, as vectorised polars expressions over a region ``name`` column.

Conventions recognised (see docs/phases.md for the evidence behind each):

- tracekit's own ``tk:<phase> key=value …`` (parsed by :func:`tracekit.annotate.parse_phase_name`,
  the single source of truth for that grammar);
- SGLang scheduler steps: ``step[EXTEND bs=15 toks=15360]`` (prefill), ``step[DECODE bs=32]``
  (decode), ``step[MIXED …]`` (mixed);
- vLLM-style steps: ``execute_<tokens>_context_<n>(sq…sk…sqsq…sqsk…)_generation_<m>(sq…sk…)``:
  n context (prefill) requests and m generation (decode) requests; n > 0 = m → prefill,
  n = 0 < m → decode, both > 0 → mixed. Inside each parenthesis ``sq`` is the sum of query
  tokens and ``sk`` the sum of key/context tokens of those requests;
- any name containing "prefill" or "decode" (case-insensitive; both → mixed), except "decoder",
  which names a model part, not the phase;
- user rules ``REGEX=PHASE`` (:func:`parse_phase_map`), which win over all built-ins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import polars as pl

from tracekit.errors import UsageError

PREFILL: Final = "prefill"
DECODE: Final = "decode"
MIXED: Final = "mixed"
OTHER: Final = "other"
PHASES: Final = (PREFILL, DECODE, MIXED, OTHER)

SGLANG_RE: Final = r"^step\[(EXTEND|PREFILL|DECODE|MIXED)\b([^\]]*)\]"
_SGLANG_PHASE: Final = {"EXTEND": PREFILL, "PREFILL": PREFILL, "DECODE": DECODE, "MIXED": MIXED}
VLLM_RE: Final = r"^execute_(\d+)_context_(\d+)\(([^)]*)\)_generation_(\d+)\(([^)]*)\)"
PROFILER_STEP_RE: Final = r"#(\d+)$"

PhaseRules = Sequence[tuple[str, str]]


def parse_phase_map(items: Iterable[str] | Mapping[str, str] | PhaseRules | None) -> list[tuple[str, str]]:
    """User rules from ``REGEX=PHASE`` strings (or (regex, phase) pairs / a mapping), in order.

    The split is at the last ``=`` (a regex may contain ``=``; a phase never does). Raises
    :class:`UsageError` on a missing ``=``, an unknown phase or a regex that does not compile.
    """
    if items is None:
        return []
    pairs: list[tuple[str, str]] = []
    seq = items.items() if isinstance(items, Mapping) else items
    for item in seq:
        if isinstance(item, str):
            regex, sep, phase = item.rpartition("=")
            if not sep or not regex:
                raise UsageError(f"--phase-map {item!r}: expected REGEX=PHASE")
        else:
            regex, phase = item
        phase = phase.strip().lower()
        if phase not in PHASES:
            raise UsageError(f"--phase-map {regex!r}: phase {phase!r} is not one of {', '.join(PHASES)}")
        try:
            re.compile(regex)
        except re.error as exc:
            raise UsageError(f"--phase-map {regex!r}: not a valid regular expression ({exc})") from None
        pairs.append((regex, phase))
    return pairs


def _int(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.Int64, strict=False)


def sglang_columns(name: pl.Expr) -> dict[str, pl.Expr]:
    """phase, batch (bs=), tokens (toks=) of SGLang ``step[MODE …]`` names; nulls elsewhere."""
    mode = name.str.extract(SGLANG_RE, 1)
    body = name.str.extract(SGLANG_RE, 2)
    return {
        "phase": mode.replace_strict(_SGLANG_PHASE, default=None, return_dtype=pl.String),
        "batch": _int(body.str.extract(r"\bbs=(\d+)", 1)),
        "tokens": _int(body.str.extract(r"\btoks=(\d+)", 1)),
    }


def vllm_columns(name: pl.Expr) -> dict[str, pl.Expr]:
    """phase and attributes of vLLM-style ``execute_…_context_n(…)_generation_m(…)`` names.

    tokens = the leading number (tokens scheduled in the step); batch = n + m; decode_seqs = m;
    prefill_tokens = ``sq`` of the context part; kv_tokens = ``sk`` of both parts (KV entries the
    step's attention reads); ctx = kv_tokens // batch (mean context per sequence).
    """
    tokens = _int(name.str.extract(VLLM_RE, 1))
    n = _int(name.str.extract(VLLM_RE, 2))
    m = _int(name.str.extract(VLLM_RE, 4))
    ctx_part = name.str.extract(VLLM_RE, 3)
    gen_part = name.str.extract(VLLM_RE, 5)
    sk = _int(ctx_part.str.extract(r"sk(\d+)", 1)) + _int(gen_part.str.extract(r"sk(\d+)", 1))
    batch = n + m
    phase = (
        pl.when((n > 0) & (m > 0)).then(pl.lit(MIXED))
        .when(n > 0).then(pl.lit(PREFILL))
        .when(m > 0).then(pl.lit(DECODE))
        .when(n.is_not_null()).then(pl.lit(OTHER))
    )
    return {
        "phase": phase,
        "tokens": tokens,
        "batch": batch,
        "decode_seqs": m,
        "prefill_tokens": _int(ctx_part.str.extract(r"^sq(\d+)", 1)),
        "kv_tokens": sk,
        "ctx": pl.when(batch > 0).then(sk // batch),
    }


def keyword_phase(name: pl.Expr) -> pl.Expr:
    """prefill / decode / mixed from the words in a name (case-insensitive), else null."""
    low = name.str.to_lowercase()
    # "decoder" names a model part (encoder/decoder towers), not the decode phase.
    pre, dec = low.str.contains("prefill"), low.str.contains(r"decode(?:[^r]|$)")
    return pl.when(pre & dec).then(pl.lit(MIXED)).when(pre).then(pl.lit(PREFILL)).when(dec).then(pl.lit(DECODE))


def user_phase(name: pl.Expr, rules: PhaseRules) -> tuple[pl.Expr, pl.Expr]:
    """(phase, rule) of the first matching user rule, nulls when none matches."""
    phase: pl.Expr = pl.lit(None, pl.String)
    rule: pl.Expr = pl.lit(None, pl.String)
    for regex, ph in reversed(list(rules)):  # built inside-out so the first rule wins
        hit = name.str.contains(regex)
        phase = pl.when(hit).then(pl.lit(ph)).otherwise(phase)
        rule = pl.when(hit).then(pl.lit(f"--phase-map {regex}={ph}")).otherwise(rule)
    return phase, rule
