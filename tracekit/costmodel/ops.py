"""FLOPs and minimum bytes per operator (docs/costmodel.md has every formula and convention).

``op_costs(ops)`` adds to the canonical ops table:

- ``flops`` (Float64): floating-point operations of the op's own work; null when no model,
- ``bytes`` (Float64): minimum bytes moved (each input read once, each output written once),
- ``cost_model`` (String): the formula's name, ``counted_in_child`` / ``counted_in_parent`` when
  the work is costed at another op of the same stack, null when there is no model,
- ``dtype`` (String): canonical dtype (bf16, fp16, fp32, fp8_e4m3, int64, ...),
- ``covered`` (Boolean): whether this op's device work is inside some cost model (its own, a
  descendant's, or a costed ancestor's) -- the coverage that analyses report.

Every unit of work is costed exactly once along any root-to-leaf op path:
an op whose descendant has a model of a higher class (GEMM/attention > norm/softmax >
elementwise/copy), or same-class descendants moving at least half its bytes, defers to them
(``counted_in_child``: e.g. ``aten::linear`` -> ``aten::addmm``); a modelled op below a costed
op is folded into that ancestor
(``counted_in_parent``: e.g. the ``aten::copy_`` of a bias inside CPU ``aten::addmm``, the
``aten::pow``/``aten::mean`` inside a composite ``aten::rms_norm``).

Implementation (linear in rows times nesting depth, no joins on strings): formulas run once per
unique (name, input_dims, input_types, concrete_inputs) signature, grouped on a 64-bit hash that
is checked against the key strings (exact regrouping on a collision); results are gathered back
by position. The op tree is walked by gathering parent row positions (a direct table by
(trace, op_id) when ids are dense, as loaders write them; else one integer join), one gather per
nesting level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from tracekit.costmodel.context import hint_column
from tracekit.costmodel.parallel import parallel_layout, per_rank
from tracekit.tables.trace import Trace
from tracekit.costmodel.formulas import CONTRADICTION, DTYPES, canonical_name, priced_expr, signature_cost
from tracekit.tables.gather import take

COUNTED_IN_CHILD: Final = "counted_in_child"
COUNTED_IN_PARENT: Final = "counted_in_parent"
_SEP: Final = "\x1f"
# Same-class descendants take over a parent's cost when they move at least this share of its bytes.
DEFER_SHARE: Final = 0.5
_KEYS: Final = ["name", "_dims_k", "_types_k", "_conc_k"]
_SIZE_OF: Final = {canon: size for canon, size in DTYPES.values()}
_CANON: Final = {k: v[0] for k, v in DTYPES.items()}
# A cycle in parent_id would be a loader bug; the ancestor walks stop after min(rows, this) levels.
_MAX_DEPTH: Final = 10_000
_MIX: Final = 0x9E3779B97F4A7C15  # odd 64-bit multiplier combining the per-column hashes
_SIG_SCHEMA: Final = {
    "_flops": pl.Float64(),
    "_bytes": pl.Float64(),
    "_model": pl.String(),
    "_mdtype": pl.String(),
    "_rank": pl.Int8(),
    "_unknown": pl.Float64(),
    "_note": pl.String(),
}


def _signature_hash(keys: pl.DataFrame) -> pl.Series:
    """One UInt64 per row over the ``_KEYS`` strings. Only has to be fast: ``_group_ids`` checks
    every row against its group's first row."""
    h = pl.lit(0, dtype=pl.UInt64())
    for i, k in enumerate(_KEYS):
        h = (h * pl.lit(_MIX, dtype=pl.UInt64())) ^ pl.col(k).hash(seed=i)
    return keys.select(h.alias("_h")).to_series()


def _group_ids(keys: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """(group id per row, row of each group's first occurrence) for rows with equal ``_KEYS``.

    Groups on a 64-bit hash, then compares every row's key strings with its group's first row;
    on any mismatch (a hash collision) it regroups on the strings themselves, so groups are always
    exactly the equal keys."""
    h = _signature_hash(keys)
    first = h.arg_unique()
    ids = pl.DataFrame({"_h": take(h, first), "_gid": pl.int_range(first.len(), dtype=pl.UInt32(), eager=True)})
    gid = pl.DataFrame({"_h": h}).join(ids, on="_h", how="left", maintain_order="left").get_column("_gid")
    rep = take(first, gid)
    if all(keys[k].equals(take(keys[k], rep)) for k in _KEYS):
        return gid, first
    uniq = keys.unique(subset=_KEYS, keep="first", maintain_order=True).with_row_index("_gid")
    gid = keys.join(uniq, on=_KEYS, how="left", maintain_order="left").get_column("_gid")
    first = gid.arg_unique()
    return gid, first


def _signature_table(ops: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame]:
    """(signature row per op, null where no formula applies; one row per unique signature with
    its cost and ``_calls``). The only Python loop: once per signature."""
    both = (
        ops.lazy()
        .select(
            pl.int_range(pl.len(), dtype=pl.UInt32()).alias("_row"),
            "name",
            "input_dims",
            "input_types",
            "concrete_inputs",
        )
        .filter(priced_expr(pl.col("name")))
        .with_columns(
            pl.col("input_dims").fill_null("").alias("_dims_k"),
            pl.col("input_types").list.join(_SEP).fill_null("").alias("_types_k"),
            pl.col("concrete_inputs").list.join(_SEP).fill_null("").alias("_conc_k"),
        )
        .collect(engine="in-memory")
    )  # one query: the priced ops and their key strings
    keys = both[_KEYS].rechunk()  # gathers on many-chunk columns are several times slower
    gid, first = _group_ids(keys)
    reps = both.select("name", "input_dims", "input_types", "concrete_inputs")[first]
    costs = [signature_cost(*r) for r in reps.iter_rows()]
    rows = [(c.flops, c.bytes, c.model, c.dtype, c.rank, c.unknown_elems, c.note) if c else (None,) * 7 for c in costs]
    calls = (
        pl.LazyFrame({"_gid": gid}).group_by("_gid").len().sort("_gid").collect(engine="in-memory").get_column("len")
    ).cast(pl.Float64())
    sig = pl.DataFrame(rows, schema=_SIG_SCHEMA, orient="row").with_columns(calls.alias("_calls"))
    per_row = pl.repeat(None, ops.height, dtype=pl.UInt32(), eager=True).scatter(both.get_column("_row"), gid)
    return per_row, sig


def _price_unknown(sig: pl.DataFrame) -> pl.DataFrame:
    """TensorList inputs hide their element type: price them at the table's dominant float dtype
    (the dtype with the most bytes over all modelled calls)."""
    dominant = (
        sig.lazy()
        .filter(pl.col("_model").is_not_null() & pl.col("_mdtype").is_not_null())
        .group_by("_mdtype")
        .agg((pl.col("_bytes") * pl.col("_calls")).sum())
        .sort("_bytes", descending=True)
        .collect(engine="in-memory")
        .get_column("_mdtype")
        .head(1)
        .to_list()
    )
    dom = dominant[0] if dominant else "fp32"
    return sig.with_columns(
        pl.when(pl.col("_unknown") > 0)
        .then(pl.col("_bytes") + pl.col("_unknown") * _SIZE_OF.get(dom, 4.0))
        .otherwise(pl.col("_bytes"))
        .alias("_bytes"),
        pl.when(pl.col("_unknown") > 0).then(pl.lit(dom)).otherwise(pl.col("_mdtype")).alias("_mdtype"),
    )


def _parent_rows(ops: pl.DataFrame) -> pl.Series:
    """Row position of each op's parent (same trace_id, op_id == parent_id); null when none.

    Loaders number ops densely, so (trace, op_id) is turned into one integer and looked up in a
    direct table (position by id); sparse or duplicated ids fall back to an integer join (on a
    duplicated id the first row wins)."""
    n = ops.height
    op_id, parent = ops.get_column("op_id").cast(pl.Int64()), ops.get_column("parent_id").cast(pl.Int64())
    raw = ops.get_column("trace_id")
    if (
        n
        and op_id.null_count() == 0
        and op_id.is_sorted()
        and op_id[-1] - op_id[0] == n - 1
        and op_id.n_unique() == n
        and (raw.null_count() == n or (raw.null_count() == 0 and bool((raw == raw[0]).all())))
    ):  # one trace, ids = row + first id (the loaders' layout): the direct table is the identity
        lo = op_id[0]
        row = pl.when(parent.is_between(lo, lo + n - 1)).then(parent - lo).cast(pl.UInt32())
        return pl.select(row.alias("literal")).to_series()
    tid = raw.fill_null("")
    one_trace = n == 0 or bool((tid == tid[0]).all())
    code = (
        pl.repeat(0, n, dtype=pl.Int64(), eager=True)
        if one_trace
        else tid.cast(pl.Categorical()).to_physical().cast(pl.Int64())
    )
    lo, hi = op_id.min(), op_id.max()
    rows = pl.int_range(n, dtype=pl.UInt32(), eager=True)
    if isinstance(lo, int) and isinstance(hi, int):
        span = hi - lo + 1
        size = span * (int(code.max() or 0) + 1)  # type: ignore[arg-type]
        if size <= 4 * n + 1024:
            has = op_id.is_not_null()
            lut = pl.repeat(None, size, dtype=pl.UInt32(), eager=True).scatter(
                (code.filter(has) * span + op_id.filter(has) - lo), rows.filter(has)
            )
            if size - lut.null_count() == int(has.sum()):  # no duplicated (trace, op_id)
                ok = parent.is_not_null() & (parent >= lo) & (parent <= hi)
                key = pl.select(pl.when(ok).then(code * span + parent - lo)).to_series()
                return take(lut, key)
    left = pl.DataFrame({"_tid": code, "_id": parent})
    right = (
        pl.DataFrame({"_tid": code, "_id": op_id, "_pos": rows})
        .drop_nulls("_id")
        .unique(subset=["_tid", "_id"], keep="first", maintain_order=True)
    )
    return left.join(right, on=["_tid", "_id"], how="left", maintain_order="left").get_column("_pos")


def _descendant_totals(parent: pl.Series, rank: pl.Series, nbytes: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Per op: max class and summed bytes of its modelled descendants whose class is at least the
    op's own (nulls where none). One gather per nesting level."""
    n = parent.len()
    rows = rank.is_not_null().arg_true()
    r, b, anc = take(rank, rows), take(nbytes, rows), take(parent, rows)
    parts: list[pl.DataFrame] = []
    # (null tests only where a Series has nulls: each is a polars query)
    for _ in range(min(n, _MAX_DEPTH)):  # no acyclic path is longer than n
        dead = anc.null_count()
        if dead == anc.len():
            break
        if dead:
            alive = anc.is_not_null()
            r, b, anc = r.filter(alive), b.filter(alive), anc.filter(alive)
        ar = take(rank, anc)
        keep = r >= ar  # r has no nulls: null where the ancestor has no class
        keep = keep.fill_null(False) if keep.null_count() else keep
        parts.append(pl.DataFrame({"_anc": anc.filter(keep), "_r": r.filter(keep), "_b": b.filter(keep)}))
        anc = take(parent, anc)
    desc_rank = pl.repeat(None, n, dtype=pl.Int8(), eager=True)
    desc_bytes = pl.repeat(None, n, dtype=pl.Float64(), eager=True)
    if parts:
        agg = pl.concat(parts).group_by("_anc").agg(pl.col("_r").max(), pl.col("_b").sum())
        if agg.height:
            desc_rank = desc_rank.scatter(agg["_anc"], agg["_r"])
            desc_bytes = desc_bytes.scatter(agg["_anc"], agg["_b"])
    return desc_rank, desc_bytes


def _under(parent: pl.Series, costed: pl.Series) -> pl.Series:
    """Per op: whether some ancestor is ``costed``. One gather per nesting level."""
    n = parent.len()
    rows = parent.is_not_null().arg_true()
    anc = take(parent, rows)
    hits: list[pl.Series] = []
    for _ in range(min(n, _MAX_DEPTH)):  # no acyclic path is longer than n
        if not rows.len():
            break
        hit = take(costed, anc)
        hit = hit.fill_null(False) if hit.null_count() else hit  # (each null test is a polars query)
        hits.append(rows.filter(hit))
        rest = ~hit
        rows, anc = rows.filter(rest), take(parent, anc.filter(rest))
        if anc.null_count():
            alive = anc.is_not_null()
            rows, anc = rows.filter(alive), anc.filter(alive)
    under = pl.repeat(False, n, dtype=pl.Boolean(), eager=True)
    if hits:
        idx = pl.concat(hits)
        if idx.len():
            under = under.scatter(idx, True)
    return under


def _first_dtype(types: pl.Series) -> pl.Series:
    """Canonical dtype of the first typed tensor input, one list position at a time over the rows
    still without one (almost all rows resolve at position 0 or 1). A trace without recorded
    shapes has none: its nulls without a query (which, on a big trace, made transient string and
    list columns of every op)."""
    if types.null_count() == types.len():
        return pl.repeat(None, types.len(), dtype=pl.String(), eager=True).alias(types.name)
    t = pl.lit(types)
    first = t.list.get(0, null_on_oob=True).replace_strict(_CANON, default=None, return_dtype=pl.String())
    lens = t.list.len().fill_null(0)
    f = pl.select(first.alias("out"), lens.alias("lens"), (first.is_null() & (lens > 1)).alias("todo"))
    out, lens_s, todo = f["out"].alias(types.name), f["lens"], f["todo"]
    rows, sub, sub_len = todo.arg_true(), types.filter(todo), lens_s.filter(todo)
    i = 1
    while rows.len():
        d_expr = (
            pl.lit(sub).list.get(i, null_on_oob=True).replace_strict(_CANON, default=None, return_dtype=pl.String())
        )
        step = pl.select(d_expr.alias("d"), d_expr.is_not_null().alias("got"))
        d, got = step["d"], step["got"]
        if got.any():
            out = out.scatter(rows.filter(got), d.filter(got))
        i += 1
        rest = ~got & (sub_len > i)
        rows, sub, sub_len = rows.filter(rest), sub.filter(rest), sub_len.filter(rest)
    return out


def op_costs(
    ops: pl.DataFrame,
    regions: pl.DataFrame | None = None,
    launched: pl.DataFrame | pl.LazyFrame | None = None,
    model: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """The ops table plus ``flops``, ``bytes``, ``cost_model``, ``dtype``, ``covered`` and
    ``cost_note`` (why an op has no cost although a formula exists: its inputs contradict).

    Input: a frame with the canonical ops columns (tracekit.tables.schema.OPS; at least name, op_id,
    parent_id, input_dims, input_types, concrete_inputs; trace_id optional). ``regions`` (the
    trace's regions) and ``launched`` (``op_id, name``: the kernels each op launched) give the
    formulas that need them their context (tracekit/costmodel/context.py); without them those
    ops get no cost (``launched`` as a query is collected only when some op is a MoE op).
    ``model``: the model's config (``meta["model"]``, --model) fills a MoE op's top-k, expert size
    and weight format where the trace does not say; where both say and differ, the trace's is
    used and ``cost_note`` names the field. Units:
    FLOPs and bytes per call. Pure; never raises on odd shapes (those ops get a null cost).
    """
    if "trace_id" not in ops.columns:
        ops = ops.with_columns(pl.lit(None, dtype=pl.String()).alias("trace_id"))
    cols = ops.columns
    parent = _parent_rows(ops)
    canon = ops.select(canonical_name(pl.col("name"))).to_series()
    hint, cfg_note = hint_column(ops, canon, regions, launched, parent, model)
    per, note = _priced(ops, canon, hint)
    modelled = per.get_column("_modelled").alias("_model")
    rank = pl.select(pl.when(modelled).then(per.get_column("_rank"))).to_series()

    # Count once per stack: resolve composite parents and folded children.
    desc_rank, desc_bytes = _descendant_totals(parent, rank, per.get_column("_bytes"))
    # Defer to descendants of a higher class always; to same-class descendants only when they
    # move at least half the parent's bytes (linear -> addmm, mean -> sum, add_ -> add_), not
    # when they are a sliver of it (sum -> fill_ of the output, div_ -> copy_ of a scalar).
    in_child = pl.select(
        (modelled & ((desc_rank > rank) | (desc_bytes >= DEFER_SHARE * per.get_column("_bytes")))).fill_null(False)
    ).to_series()
    under = _under(parent, modelled & ~in_child)
    # Computed on the derived single-chunk columns, then appended: no expression touches ``ops``.
    out = (
        per.lazy()
        .with_columns(
            in_child.alias("_in_child"),
            under.alias("_under"),
            _first_dtype(ops.get_column("input_types")).alias("_first"),
        )
        .select(*_cost_columns(note, cfg_note))
        .collect(engine="in-memory")
    )
    return ops.select(cols).hstack(out)


def _priced(ops: pl.DataFrame, canon: pl.Series, hint: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """Each op's formula result, priced once per distinct signature (``_flops, _bytes, _model,
    _mdtype, _rank``, null where its inputs contradict, and ``_modelled``), and the formulas' notes."""
    priced = (
        ops.lazy()
        .select("name", "input_dims", "input_types", "concrete_inputs")
        .with_columns(
            canon.alias("name"),
            pl.when(pl.lit(hint).is_not_null())
            .then(pl.concat_list(pl.col("concrete_inputs").fill_null([]), hint))
            .otherwise(pl.col("concrete_inputs"))
            .alias("concrete_inputs"),
        )
        .collect(engine="in-memory")
    )
    sig_row, sig = _signature_table(priced)
    sig = _price_unknown(sig)
    per = pl.DataFrame(
        {c: take(sig.get_column(c), sig_row) for c in ("_flops", "_bytes", "_model", "_mdtype", "_rank", "_note")}
    )
    ok = pl.col("_model") != CONTRADICTION
    per_ok = per.select(
        *[pl.when(ok).then(pl.col(c)).alias(c) for c in ("_flops", "_bytes", "_model", "_mdtype", "_rank")],
        pl.when(ok).then(pl.col("_model")).is_not_null().alias("_modelled"),  # (one query for the three)
    )
    return per_ok, per.get_column("_note")


def _cost_columns(note: pl.Series, cfg_note: pl.Series) -> list[pl.Expr]:
    """The output columns: FLOPs and bytes where the op owns its cost, the model (or where the cost
    is counted instead), dtype, covered, and the notes."""
    has_model = pl.col("_model").is_not_null()
    own = has_model & ~pl.col("_in_child") & ~pl.col("_under")
    in_parent = has_model & ~pl.col("_in_child") & pl.col("_under")
    return [
        pl.when(own).then(pl.col("_flops")).otherwise(None).cast(pl.Float64()).alias("flops"),
        pl.when(own).then(pl.col("_bytes")).otherwise(None).cast(pl.Float64()).alias("bytes"),
        pl.when(pl.col("_in_child"))
        .then(pl.lit(COUNTED_IN_CHILD))
        .when(in_parent)
        .then(pl.lit(COUNTED_IN_PARENT))
        .otherwise(pl.col("_model"))
        .alias("cost_model"),
        pl.coalesce(pl.col("_mdtype"), pl.col("_first")).alias("dtype"),
        (has_model | pl.col("_under")).alias("covered"),
        pl.when(note.is_not_null() | cfg_note.is_not_null())
        .then(pl.concat_str([note, cfg_note], separator="; ", ignore_nulls=True))
        .alias("cost_note"),
    ]


def trace_costs(
    trace: Trace, activities: pl.DataFrame | None = None, launched: pl.LazyFrame | None = None
) -> pl.DataFrame:
    """:func:`op_costs` of a trace's ops with their context: the trace's regions (step sums for
    paged attention) and, from the attribution's ``activities`` (``op_id``, ``name``) or the query
    ``launched`` of those columns, the kernels each op launched (MoE weight format). Their distinct
    pairs are collected only for a trace with a MoE op (without one, every kernel name was hashed
    for nothing, which held much memory at once on a big trace)."""
    if launched is None and activities is not None and {"op_id", "name"} <= set(activities.columns):
        launched = activities.lazy().select("op_id", "name")
    if launched is not None:
        launched = launched.drop_nulls("op_id").unique()
    return op_costs(trace.ops, trace.regions, launched, rank_model(trace))


def rank_model(trace: Trace) -> dict[str, Any] | None:
    """The trace's model config (``meta["model"]``, --model) at the sizes this rank computes
    (tracekit/costmodel/parallel.py); None without one. Raises UsageError when the config does
    not fit the trace."""
    model = trace.meta.get("model")
    if not model:
        return None
    ws = (trace.meta.get("distributed") or {}).get("world_size")
    return per_rank(model, parallel_layout(trace.ops, model, ws if isinstance(ws, int) else None))


def unmodelled(costed: pl.DataFrame) -> pl.DataFrame:
    """Ops without coverage, grouped by name: (name, calls, with_shapes) sorted by calls.

    Analyses that know device time per op should rank by that instead; this is the shape-only
    view (``with_shapes`` = calls that recorded Input Dims, so a missing formula is the gap).
    """
    return (
        costed.filter(~pl.col("covered"))
        .group_by("name")
        .agg(pl.len().alias("calls"), pl.col("input_dims").is_not_null().sum().alias("with_shapes"))
        .sort(["calls", "name"], descending=[True, False])
    )
