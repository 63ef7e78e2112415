"""Region labelling: every region gets a phase (prefill | decode | mixed | other), the one-line rule
that gave it, a step number and the attributes its name carries. See docs/phases.md.

Precedence for a region's own phase: user ``--phase-map`` rules (first match wins) → graph capture
and warm-up spans (other) → tracekit's
``tk:`` names → SGLang ``step[…]`` → vLLM ``execute_…`` → names containing prefill/decode. A region
with none of its own inherits its nearest ancestor's ("inherited from …"); else ``other``.
When nothing is annotated, :func:`infer_phase_from_shapes` looks at the attention ops' query length.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Final

import polars as pl

from tracekit.labels import phases as ph
from tracekit.annotate import parse_phase_name
from tracekit.labels.tk_ints import tk_int
from tracekit.attribution.activities import cpu_regions
from tracekit.attribution.links import forward_threads, nearest_ancestor, region_tree
from tracekit.tables.trace import Trace
from tracekit.tables.cases import first

ATTR_COLUMNS: Final = ("batch", "tokens", "ctx", "prefill_tokens", "decode_seqs", "prompt_tokens", "kv_tokens")
TK_KEYS: Final = ("step", *ATTR_COLUMNS)  # the integer tk: attributes


def label_regions(
    trace: Trace,
    phase_map: Iterable[str] | Mapping[str, str] | ph.PhaseRules | None = None,
    tree: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The regions table plus ``phase``, ``phase_rule``, ``step`` (Int64), the parsed attributes
    :data:`ATTR_COLUMNS` (Int64, null where the name does not say), ``attrs`` (JSON text of every
    ``tk:`` attribute) and ``effective_parent_id`` (the region tree across threads, as attribution
    uses it). ``tree``: that region tree when the caller has it already (``Attribution.region_tree``
    of this trace), else computed here. Raises :class:`~tracekit.errors.UsageError` for a bad ``phase_map``."""
    rules = ph.parse_phase_map(phase_map)
    regions = trace.regions
    if tree is None:
        tree = region_tree(cpu_regions(regions), forward_threads(trace.ops, cpu_regions(regions)))
    # What a name says is worked out once per distinct name and joined back: the rows then share
    # each name's strings (a long name repeated on many ranges is not copied per row).
    named = (
        regions.lazy()
        .select("name")
        .unique()
        .join(_tk_frame(regions["name"]).lazy(), on="name", how="left")
        .with_columns(*_own_labels(rules), *_step_attributes())
        .drop(*(f"_tk_{k}" for k in TK_KEYS), "_tk_phase")
        .with_columns(pl.col("_family").rank("dense").alias("_family"))  # grouped below: a number, not the text
    )
    # the joins and columns before the inheritance run as one query (in-memory engine, as eager)
    q = regions.lazy().join(
        tree.lazy().select("region_id", pl.col("parent_id").alias("effective_parent_id")), on="region_id", how="left"
    )
    q = q.with_columns(pl.coalesce("effective_parent_id", "parent_id").alias("effective_parent_id"))
    df = _inherit(q.join(named, on="name", how="left").collect(engine="in-memory"))
    occurrence = (pl.col("start_ns").rank("ordinal").over(["kind", "_family"]) - 1).cast(pl.Int64)
    keep = [*regions.columns, "phase", "phase_rule", "step", *ATTR_COLUMNS, "attrs", "effective_parent_id"]
    return (
        df.lazy()
        .with_columns(pl.coalesce("_explicit_step", occurrence).alias("step"), pl.col("_tk_attrs").alias("attrs"))
        .select(keep)
        .sort("region_id")
        .collect(engine="in-memory")
    )


def _own_labels(rules: ph.PhaseRules) -> tuple[pl.Expr, pl.Expr]:
    """``_own`` (the phase a region's own name gives, by the first rule that applies: the user's
    --phase-map, warm-up/capture names, tk: annotations, SGLang, vLLM, ATOM step names, keywords)
    and ``_rule`` (which rule, in words)."""
    name = pl.col("name")
    sg, vl, at = ph.sglang_columns(name), ph.vllm_columns(name), ph.atom_columns(name)
    up, urule = ph.user_phase(name, rules)
    kw = ph.keyword_phase(name)
    warm = name.str.contains(ph.WARMUP_RE)
    own = pl.coalesce(
        up, pl.when(warm).then(pl.lit(ph.OTHER)), pl.col("_tk_phase"), sg["phase"], vl["phase"], at["phase"], kw
    )
    vllm = pl.format(
        "vLLM execute_…: {} context, {} generation requests", name.str.extract(ph.VLLM_RE, 2), vl["decode_seqs"]
    )
    kw_rule = pl.format(
        'name contains "{}"', pl.when(kw == ph.MIXED).then(pl.lit('prefill" and "decode')).otherwise(kw)
    )
    rule = first(
        (up.is_not_null(), urule),
        (warm, pl.lit("graph capture / warm-up (not a steady-state step)")),
        (pl.col("_tk_phase").is_not_null(), pl.lit("tk: annotation ") + name.str.extract(r"^(tk:\S+)", 1)),
        (sg["phase"].is_not_null(), pl.lit("SGLang ") + name.str.extract(r"^(step\[\w+)", 1) + pl.lit(" …]")),
        (vl["phase"].is_not_null(), vllm),
        (at["phase"].is_not_null(), pl.lit("ATOM ") + at["phase"] + pl.lit("[…]")),
        (kw.is_not_null(), kw_rule),
    )
    return own.alias("_own"), rule.alias("_rule")


def _step_attributes() -> list[pl.Expr]:
    """The step attributes a region's name states (tk: annotations first, then the engines' step
    names), the step family and an explicit step number."""
    name = pl.col("name")
    sg, vl, at = ph.sglang_columns(name), ph.vllm_columns(name), ph.atom_columns(name)
    return [
        pl.coalesce("_tk_batch", sg["batch"], vl["batch"], at["batch"]).alias("batch"),
        pl.coalesce("_tk_tokens", sg["tokens"], vl["tokens"], at["tokens"]).alias("tokens"),
        pl.coalesce("_tk_ctx", vl["ctx"]).alias("ctx"),
        pl.coalesce(
            "_tk_prefill_tokens",
            pl.when(sg["phase"] == ph.PREFILL).then(sg["tokens"]),
            vl["prefill_tokens"],
            pl.when(at["phase"] == ph.PREFILL).then(at["tokens"]),
        ).alias("prefill_tokens"),
        pl.coalesce(
            "_tk_decode_seqs",
            pl.when(sg["phase"] == ph.DECODE).then(sg["batch"]),
            vl["decode_seqs"],
            pl.when(at["phase"] == ph.DECODE).then(at["batch"]),
        ).alias("decode_seqs"),
        pl.col("_tk_prompt_tokens").alias("prompt_tokens"),
        pl.coalesce("_tk_kv_tokens", vl["kv_tokens"]).alias("kv_tokens"),
        first(
            (pl.col("_tk_attrs").is_not_null(), pl.lit("tk")),  # every parsed tk: name has its attrs
            (sg["phase"].is_not_null(), pl.lit("sglang step")),
            (vl["phase"].is_not_null(), pl.lit("vllm execute")),
            (at["phase"].is_not_null(), pl.lit("atom step")),
            otherwise=name.str.replace(ph.PROFILER_STEP_RE, "#"),
        ).alias("_family"),
        pl.coalesce("_tk_step", ph.as_int(name.str.extract(ph.PROFILER_STEP_RE, 1))).alias("_explicit_step"),
    ]


def _tk_frame(names: pl.Series) -> pl.DataFrame:
    """One row per distinct ``tk:`` name with its parsed phase and attributes. The grammar lives in
    :func:`tracekit.annotate.parse_phase_name`; applying it per distinct name (not per region)
    keeps one source of truth for it."""
    rows = []
    tk = pl.select(pl.lit(names).filter(pl.lit(names).str.starts_with("tk:")).unique().alias("n")).to_series()
    for n in tk.to_list():  # (the distinct tk: names in one polars query)
        parsed = parse_phase_name(n)
        if parsed is None:
            continue
        phase = parsed.pop("phase")
        row: dict[str, object] = {
            "name": n,
            "_tk_phase": phase if phase in ph.PHASES else None,
            "_tk_attrs": json.dumps(parsed, sort_keys=True),
        }
        # beyond int64: null (counted by tk_ints.out_of_range_warnings)
        row.update({f"_tk_{key}": tk_int(parsed.get(key)) for key in TK_KEYS})
        rows.append(row)
    schema: dict[str, pl.DataType] = {
        "name": pl.String(),
        "_tk_phase": pl.String(),
        "_tk_attrs": pl.String(),
    }
    schema.update({f"_tk_{k}": pl.Int64() for k in TK_KEYS})
    return pl.DataFrame(rows, schema=schema)


def _inherit(df: pl.DataFrame) -> pl.DataFrame:
    """Phase from the nearest region at or above each (effective parents) with one of its own."""
    tree = df.select("region_id", pl.col("effective_parent_id").alias("parent_id"))
    own = df.filter(pl.col("_own").is_not_null()).select(
        pl.col("region_id").alias("ancestor_id"), pl.col("_own").alias("_ap"), pl.col("name").alias("_src")
    )
    nearest = nearest_ancestor(tree, own["ancestor_id"]).join(own, on="ancestor_id")
    df = df.join(nearest.select("region_id", "_ap", "_src"), on="region_id", how="left", maintain_order="left")
    return df.with_columns(
        first(
            (pl.col("_rule").is_not_null(), pl.col("_rule")),
            (pl.col("_ap").is_not_null(), pl.format('inherited from "{}"', pl.col("_src"))),
            otherwise=pl.lit("no phase rule matched"),
        ).alias("phase_rule"),
        pl.col("_ap").fill_null(ph.OTHER).alias("phase"),
    )


# --- shape inference ---------------------------------------------------------------------------

# [B, H, N_Q, d] (query is the first input): the SDPA entry points.
_SDPA_RE: Final = r"^aten::(scaled_dot_product_attention|_scaled_dot_product_\w*attention\w*)$"
# [B, N_Q, H, d]: the kernels' own entry points, used only when no SDPA op is present.
_FLASH_RE: Final = r"^aten::_(flash|efficient)_attention_forward$"
_DIMS4: Final = r"^\s*\[\s*\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]"


def attention_query_lengths(ops: pl.DataFrame) -> pl.DataFrame:
    """(op_id, name, batch, query_len) for the attention ops whose query shape is known; one layout
    family per trace (SDPA ops, else flash/efficient entry points) so a call is never counted twice."""
    # the name rules run once per distinct name (a million ops hold a few hundred), not per op
    names = (
        ops.lazy()
        .select(pl.col("name").unique())
        .filter(~pl.col("name").str.contains("(?i)backward"))
        .with_columns(
            pl.col("name").str.contains(_SDPA_RE).alias("_sdpa"), pl.col("name").str.contains(_FLASH_RE).alias("_flash")
        )
        .collect(engine="in-memory")
    )

    def named(flag: str) -> pl.LazyFrame:
        return ops.lazy().filter(pl.col("name").is_in(pl.lit(names["name"].filter(names[flag])).implode()))

    def shapes(att: pl.LazyFrame, q_idx: int) -> pl.LazyFrame:
        dims = pl.col("input_dims")
        return att.select(
            "op_id",
            "name",
            ph.as_int(dims.str.extract(_DIMS4, 1)).alias("batch"),
            ph.as_int(dims.str.extract(_DIMS4, q_idx)).alias("query_len"),
        ).drop_nulls("query_len")

    if not (names["_sdpa"].any() or names["_flash"].any()):  # no attention op: no query
        return pl.DataFrame(schema=shapes(named("_flash"), 2).collect_schema())
    # both layout families in one query (a small trace pays per query); the SDPA one when it has ops
    sdpa = named("_sdpa").filter(pl.col("depth") == pl.col("depth").min())
    n_sdpa, by_sdpa, by_flash = pl.collect_all(
        [sdpa.select(pl.len()), shapes(sdpa, 3), shapes(named("_flash"), 2)], engine="in-memory"
    )
    return by_sdpa if n_sdpa.item() > 0 else by_flash


def shape_stats() -> list[pl.Expr]:
    """Over attention calls (:func:`attention_query_lengths` rows): ``_n`` calls, ``_ones`` of
    query length 1, ``_lo`` and ``_hi`` the query lengths' range; what :func:`shape_phase` reads."""
    q = pl.col("query_len")
    return [pl.len().alias("_n"), (q == 1).sum().alias("_ones"), q.min().alias("_lo"), q.max().alias("_hi")]


def shape_phase() -> tuple[pl.Expr, pl.Expr]:
    """(phase, rule) of attention calls (:func:`shape_stats`): query length 1 in every call →
    decode, longer in every call → prefill, both → mixed; no call → other."""
    n, ones = pl.col("_n"), pl.col("_ones")
    phase = first(
        (n == 0, pl.lit(ph.OTHER)),
        (ones == n, pl.lit(ph.DECODE)),
        (ones == 0, pl.lit(ph.PREFILL)),
        otherwise=pl.lit(ph.MIXED),
    )
    rule = first(
        (n == 0, pl.lit("no attention op with Input Dims: phase not inferred from shapes")),
        (ones == n, pl.format("inferred from shapes: attention query length 1 ({} attention calls)", n)),
        (
            ones == 0,
            pl.format("inferred from shapes: attention query length {}–{} > 1 ({} attention calls)", "_lo", "_hi", n),
        ),
        otherwise=pl.format("inferred from shapes: attention query length 1 in {} of {} attention calls", ones, n),
    )
    return phase.alias("phase"), rule.alias("rule")


def infer_phase_from_shapes(trace: Trace, q: pl.DataFrame | None = None) -> pl.DataFrame:
    """One synthetic whole-trace region (region_id −1, kind ``inferred``) with the phase the
    attention shapes imply: query length 1 per sequence in every attention call → decode; longer
    in every call → prefill; both → mixed; no attention op with shapes → other (and the rule says
    so). Columns: name, kind, start_ns, end_ns, phase, phase_rule, step, attention_ops,
    query_len_min, query_len_max. ``q``: :func:`attention_query_lengths` of the trace's ops when
    the caller has it."""
    q = attention_query_lengths(trace.ops) if q is None else q
    spans = [
        t.lazy().select(pl.col("start_ns").min().alias("s"), pl.col("end_ns").max().alias("e"))
        for t in (trace.ops, trace.kernels)
        if t.height
    ]
    start, end = (
        pl.concat(spans).select(pl.col("s").min(), pl.col("e").max()).collect(engine="in-memory").row(0)
        if spans
        else (None, None)
    )
    phase, rule = shape_phase()
    return q.select(shape_stats()).select(
        pl.lit(-1, pl.Int64()).alias("region_id"),
        pl.lit("<whole trace>").alias("name"),
        pl.lit("inferred").alias("kind"),
        pl.lit(start, pl.Int64()).alias("start_ns"),
        pl.lit(end, pl.Int64()).alias("end_ns"),
        phase.alias("phase"),
        rule.alias("phase_rule"),
        pl.lit(None, pl.Int64()).alias("step"),
        pl.col("_n").cast(pl.Int64()).alias("attention_ops"),
        pl.col("_lo").cast(pl.Int64()).alias("query_len_min"),
        pl.col("_hi").cast(pl.Int64()).alias("query_len_max"),
    )
