"""Phase naming conventions, as vectorised polars expressions over a region ``name`` column.

Conventions recognised (see docs/phases.md for the evidence behind each):

- tracekit's own ``tk:<phase> key=value …`` (parsed by :func:`tracekit.annotate.parse_phase_name`,
  the single source of truth for that grammar);
- SGLang scheduler steps: ``step[EXTEND bs=15 toks=15360]`` (prefill), ``step[DECODE bs=32]``
  (decode), ``step[MIXED …]`` (mixed), ``step[IDLE …]`` (other), speculative decoding's
  ``step[TARGET_VERIFY …]`` and ``step[DRAFT_EXTEND …]`` (decode); mode case-insensitive;
- vLLM steps, both forms: detailed
  ``execute_<tokens>_context_<n>(sq…sk…sqsq…sqsk…)_generation_<m>(sq…sk…sqsq…sqsk…)`` and native
  ``execute_context_<n>(<ints joined by _>)_generation_<m>(<ints joined by _>)``: n context
  (prefill) requests and m generation (decode) requests; n > 0 = m → prefill, n = 0 < m →
  decode, both > 0 → mixed. In the detailed form ``sq`` is the sum of query tokens and ``sk`` the
  sum of key/context tokens of those requests; in the native form the first integer is the
  group's scheduled tokens (what follows varies across vLLM versions and is not read);
- AMD ATOM steps ``prefill[bs=… tok=… ctx=[…]]`` and ``decode[bs=real/padded tok=… d=…]``: phase
  from the word, batch = the real batch, tokens = ``tok=``;
- any name containing "prefill" or "decode" (case-insensitive; both → mixed), except "decoder",
  which names a model part, not the phase;
- graph capture and warm-up spans (:data:`WARMUP_RE`: ``capture_<n>_…``, ``_dummy_run``,
  ``_capture_graph``) → other, so their kernels stay out of the steady-state phases;
- user rules ``REGEX=PHASE`` (:func:`parse_phase_map`), which win over all built-ins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import polars as pl

from tracekit.errors import UsageError
from tracekit.tables.cases import first

PREFILL: Final = "prefill"
DECODE: Final = "decode"
MIXED: Final = "mixed"
OTHER: Final = "other"
PHASES: Final = (PREFILL, DECODE, MIXED, OTHER)

SGLANG_RE: Final = (
    r"^step\[(?i:(EXTEND|PREFILL|DECODE|MIXED|IDLE|TARGET_VERIFY|DRAFT_EXTEND_V2|DRAFT_EXTEND))\b([^\]]*)\]"
)
_SGLANG_PHASE: Final = {
    "EXTEND": PREFILL,
    "PREFILL": PREFILL,
    "DECODE": DECODE,
    "MIXED": MIXED,
    "IDLE": OTHER,
    # speculative decoding: the target model's verify pass and the draft model's passes decode
    "TARGET_VERIFY": DECODE,
    "DRAFT_EXTEND": DECODE,
    "DRAFT_EXTEND_V2": DECODE,
}
# Group 1 (the step's tokens) is absent in vLLM's native form.
VLLM_RE: Final = r"^execute_(?:(\d+)_)?context_(\d+)\(([^)]*)\)_generation_(\d+)\(([^)]*)\)"
# AMD ATOM: ``prefill[bs=2 tok=14721 ctx=[…]]``, ``decode[bs=117/128 tok=117 d=117]`` (real/padded
# batch), detailed forms adding ``sqsq= sqsk= sk=``, speculative ``spec=``.
ATOM_RE: Final = r"^(prefill|decode)\[(.*)\]$"
# Graph capture and warm-up: vLLM's ``capture_<n>_<MODE>`` / ``capture_<n>_draft_<MODE>`` labels and
# ``_dummy_run`` steps, SGLang's ``capture_<bs>_<MODE>`` labels and ``_capture_graph`` spans. Not
# steady-state work: phase other, whatever words they hold (``capture_32_DECODE``).
WARMUP_RE: Final = r"^(?:capture_\d+_|_?dummy_run\b|_capture_graph\b|capture_graph_bs_\d+)"
# Names that look like engine steps: one that no rule reads gets a warning (unread_step_names).
STEP_LIKE_RE: Final = r"^(?i:execute_|step\[|step_|forward_step)"
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
        why = regex_refusal(regex)
        if why is not None:
            raise UsageError(f"--phase-map {regex!r}: not a regular expression the matcher takes ({why})")
        pairs.append((regex, phase))
    return pairs


def regex_refusal(regex: str) -> str | None:
    """Why the engine that evaluates the rules (polars' ``str.contains``: Rust ``regex``) refuses
    ``regex``, in one line; None when it takes it. Python's ``re`` is not asked: it accepts
    look-around, back-references and ``a{99999999}``, which this engine refuses (the refusal
    used to come as a traceback from the analysis), and refuses ``\\p{Greek}``, which it takes."""
    try:
        pl.Series([""], dtype=pl.String()).str.contains(regex)
    except pl.exceptions.PolarsError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln[len("error: ") :] for ln in lines if ln.startswith("error: ")), None)
        if detail is None:  # e.g. "regex error: Compiled regex exceeds size limit of … bytes."
            detail = lines[0].removeprefix("regex error: ") if lines else type(exc).__name__
        return detail.rstrip(".")
    return None


def as_int(expr: pl.Expr) -> pl.Expr:
    """A text expression as Int64; null where it is no integer."""
    return expr.cast(pl.Int64, strict=False)


def sglang_columns(name: pl.Expr) -> dict[str, pl.Expr]:
    """phase, batch (bs=), tokens (toks=) of SGLang ``step[MODE …]`` names; nulls elsewhere."""
    mode = name.str.extract(SGLANG_RE, 1)
    body = name.str.extract(SGLANG_RE, 2)
    return {
        "phase": mode.str.to_uppercase().replace_strict(_SGLANG_PHASE, default=None, return_dtype=pl.String),
        "batch": as_int(body.str.extract(r"\b(?:bs|batch)=(\d+)", 1)),
        "tokens": as_int(body.str.extract(r"\b(?:toks|tokens)=(\d+)", 1)),
    }


def atom_columns(name: pl.Expr) -> dict[str, pl.Expr]:
    """phase, batch (the real batch of ``bs=real[/padded]``), tokens (``tok=``) of AMD ATOM's
    ``prefill[…]`` / ``decode[…]`` step names; nulls elsewhere. The padded batch is the graph key
    (tracekit/sources/kineto/capture/match.py), not the batch."""
    phase = name.str.extract(ATOM_RE, 1)
    body = name.str.extract(ATOM_RE, 2)
    return {
        "phase": phase,
        "batch": as_int(body.str.extract(r"\bbs=(\d+)", 1)),
        "tokens": as_int(body.str.extract(r"\btok=(\d+)", 1)),
    }


def vllm_columns(name: pl.Expr) -> dict[str, pl.Expr]:
    """phase and attributes of vLLM ``execute_…context_n(…)_generation_m(…)`` names (both forms).

    tokens = the leading number (tokens scheduled in the step), else the context and generation
    parts' token counts added; batch = n + m; decode_seqs = m; prefill_tokens = the context
    part's tokens (``sq…`` or its first integer); kv_tokens = ``sk`` of both parts (KV entries the
    step's attention reads; null in the native form); ctx = kv_tokens // batch (mean context per
    sequence).
    """
    n = as_int(name.str.extract(VLLM_RE, 2))
    m = as_int(name.str.extract(VLLM_RE, 4))
    ctx_part = name.str.extract(VLLM_RE, 3)
    gen_part = name.str.extract(VLLM_RE, 5)

    def part_tokens(part: pl.Expr) -> pl.Expr:
        return pl.coalesce(as_int(part.str.extract(r"^sq(\d+)", 1)), as_int(part.str.extract(r"^(\d+)(?:_|$)", 1)))

    tokens = pl.coalesce(as_int(name.str.extract(VLLM_RE, 1)), part_tokens(ctx_part) + part_tokens(gen_part))
    sk = as_int(ctx_part.str.extract(r"sk(\d+)", 1)) + as_int(gen_part.str.extract(r"sk(\d+)", 1))
    batch = n + m
    phase = first(
        ((n > 0) & (m > 0), pl.lit(MIXED)),
        (n > 0, pl.lit(PREFILL)),
        (m > 0, pl.lit(DECODE)),
        (n.is_not_null(), pl.lit(OTHER)),
    )
    return {
        "phase": phase,
        "tokens": tokens,
        "batch": batch,
        "decode_seqs": m,
        "prefill_tokens": part_tokens(ctx_part),
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


def unread_step_names(labels: pl.DataFrame, limit: int = 5) -> list[str]:
    """Warnings for step-like region names (``execute_…``, ``step[…``) that no step rule read: the
    name, how many regions carry it, and a ``--phase-map`` rule that would label it."""
    if labels.height == 0 or "phase_rule" not in labels.columns:
        return []
    read = pl.col("phase_rule").str.contains("^(?:SGLang |vLLM |ATOM |--phase-map |tk: )")
    bad = (
        labels.lazy()
        .filter(pl.col("kind") != "gpu_user_annotation")
        .filter(pl.col("name").str.contains(STEP_LIKE_RE) & ~read)
        .group_by("name")
        .agg(pl.len().alias("n"), pl.col("start_ns").min())
        .sort("start_ns")
        .collect(engine="in-memory")  # one query (in-memory engine, as the eager steps)
    )
    out = []
    for name, n, _ in bad.head(limit).iter_rows():
        stem = re.split(r"[\d(\[]", name, maxsplit=1)[0] if not name.startswith("step[") else name.split(" ")[0]
        out.append(
            f'step-like annotation "{name}" ({n} region{"s" if n != 1 else ""}) matched no step rule; label it '
            f"with --phase-map '^{re.escape(stem)}=PHASE' (PHASE: prefill, decode, mixed or other)"
        )
    if bad.height > limit:
        out.append(f"… and {bad.height - limit} more step-like names no rule read")
    return out
