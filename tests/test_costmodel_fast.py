"""op_costs (hashed signatures, positional op-tree walks) vs a straightforward reference.

The reference below is the first implementation of ``op_costs``: string-key group_by and joins,
one hash join per nesting level. The optimised path must give the identical frame (values, dtypes,
row order) on real traces, in every layout the optimised code branches on: op_id == row number
(as loaded), shuffled rows (op_id not the row number: parent ids mapped by a join), several
traces in one table, and a forced hash collision (exact regrouping).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import tracekit
from tracekit.costmodel import ops as costmodel
from tracekit.costmodel.ops import COUNTED_IN_CHILD, COUNTED_IN_PARENT, DEFER_SHARE, op_costs
from tracekit.costmodel.formulas import CONTRADICTION, DTYPES, canonical_name, priced_expr, signature_cost
from tracekit.tables.schema import conform

_SEP = "\x1f"
_KEYS = ["name", "_dims_k", "_types_k", "_conc_k"]
TRACES = ["kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "kineto/hta/trace_diff/test/test.json.gz"]


# ------------------------------------------------------------------ the reference
def _ref_signatures(df: pl.DataFrame) -> pl.DataFrame:
    # Names are looked up without engine serials (canonical_name); no context hints (no regions).
    sigs = (
        df.filter(priced_expr(canonical_name(pl.col("name"))))
        .group_by(_KEYS)
        .agg(pl.col("input_dims").first(), pl.col("input_types").first(), pl.col("concrete_inputs").first())
    )
    cols = ["_flops", "_bytes", "_model", "_mdtype", "_rank", "_unknown", "_note"]
    rows: dict[str, list[object]] = {k: [] for k in [*_KEYS, *cols]}
    for r in sigs.iter_rows(named=True):
        name = pl.select(canonical_name(pl.lit(r["name"]))).item()
        c = signature_cost(name, r["input_dims"], r["input_types"], r["concrete_inputs"])
        if c is None:
            continue
        vals = [c.flops, c.bytes, c.model, c.dtype, c.rank, c.unknown_elems, c.note]
        if c.model == CONTRADICTION:  # no cost, only the note
            vals = [None] * 6 + [c.note]
        for k in _KEYS:
            rows[k].append(r[k])
        for k, v in zip(cols, vals):
            rows[k].append(v)
    schema = {k: pl.String() for k in _KEYS} | {
        "_flops": pl.Float64(),
        "_bytes": pl.Float64(),
        "_model": pl.String(),
        "_mdtype": pl.String(),
        "_rank": pl.Int8(),
        "_unknown": pl.Float64(),
        "_note": pl.String(),
    }
    return pl.DataFrame(rows, schema=schema)


def _ref_ancestors(ops: pl.DataFrame, start: pl.DataFrame) -> pl.DataFrame:
    parent = ops.select("_tid", pl.col("op_id").alias("anc_id"), pl.col("parent_id").alias("_next"))
    front = start.select("_tid", "op_id", pl.col("parent_id").alias("anc_id")).drop_nulls("anc_id")
    parts = []
    while front.height:
        parts.append(front)
        front = (
            front.join(parent, on=["_tid", "anc_id"])
            .select("_tid", "op_id", pl.col("_next").alias("anc_id"))
            .drop_nulls("anc_id")
        )
    if not parts:
        return pl.DataFrame(schema={"_tid": pl.String(), "op_id": pl.Int64(), "anc_id": pl.Int64()})
    return pl.concat(parts)


def reference_op_costs(ops: pl.DataFrame) -> pl.DataFrame:
    cols = ops.columns
    df = ops.with_columns(
        pl.col("input_dims").fill_null("").alias("_dims_k"),
        pl.col("input_types").list.join(_SEP).fill_null("").alias("_types_k"),
        pl.col("concrete_inputs").list.join(_SEP).fill_null("").alias("_conc_k"),
        pl.col("trace_id").fill_null("").alias("_tid"),
    )
    df = df.join(_ref_signatures(df), on=_KEYS, how="left", maintain_order="left")
    dom_l = (
        df.filter(pl.col("_model").is_not_null() & pl.col("_mdtype").is_not_null())
        .group_by("_mdtype")
        .agg(pl.col("_bytes").sum())
        .sort("_bytes", descending=True)
        .get_column("_mdtype")
        .head(1)
        .to_list()
    )
    dom = dom_l[0] if dom_l else "fp32"
    size = {c: s for c, s in DTYPES.values()}.get(dom, 4.0)
    unknown = pl.col("_unknown") > 0
    df = df.with_columns(
        pl.when(unknown).then(pl.col("_bytes") + pl.col("_unknown") * size).otherwise(pl.col("_bytes")).alias("_bytes"),
        pl.when(unknown).then(pl.lit(dom)).otherwise(pl.col("_mdtype")).alias("_mdtype"),
    )
    modelled = df.filter(pl.col("_model").is_not_null()).select("_tid", "op_id", "parent_id", "_rank", "_bytes")
    m = modelled.select("_tid", "op_id", "_rank", "_bytes")
    desc = (
        _ref_ancestors(df, modelled)
        .join(m, on=["_tid", "op_id"])
        .join(m.select("_tid", pl.col("op_id").alias("anc_id"), pl.col("_rank").alias("_ar")), on=["_tid", "anc_id"])
        .filter(pl.col("_rank") >= pl.col("_ar"))
        .group_by("_tid", "anc_id")
        .agg(pl.col("_rank").max().alias("_dr"), pl.col("_bytes").sum().alias("_db"))
        .rename({"anc_id": "op_id"})
    )
    df = df.join(desc, on=["_tid", "op_id"], how="left", maintain_order="left")
    has = pl.col("_model").is_not_null()
    df = df.with_columns(
        (has & ((pl.col("_dr") > pl.col("_rank")) | (pl.col("_db") >= DEFER_SHARE * pl.col("_bytes"))))
        .fill_null(False)
        .alias("_ic")
    )
    costed = df.filter(has & ~pl.col("_ic")).select("_tid", pl.col("op_id").alias("anc_id"))
    under = (
        _ref_ancestors(df, df.select("_tid", "op_id", "parent_id"))
        .join(costed, on=["_tid", "anc_id"], how="semi")
        .select("_tid", "op_id")
        .unique()
        .with_columns(pl.lit(True).alias("_u"))
    )
    df = df.join(under, on=["_tid", "op_id"], how="left", maintain_order="left").with_columns(
        pl.col("_u").fill_null(False)
    )
    own = has & ~pl.col("_ic") & ~pl.col("_u")
    first = {k: v[0] for k, v in DTYPES.items()}
    first_dtype = (
        pl.col("input_types")
        .list.eval(pl.element().replace_strict(first, default=None, return_dtype=pl.String()).drop_nulls())
        .list.first()
    )
    return df.with_columns(
        pl.when(own).then(pl.col("_flops")).cast(pl.Float64()).alias("flops"),
        pl.when(own).then(pl.col("_bytes")).cast(pl.Float64()).alias("bytes"),
        pl.when(pl.col("_ic"))
        .then(pl.lit(COUNTED_IN_CHILD))
        .when(has & pl.col("_u"))
        .then(pl.lit(COUNTED_IN_PARENT))
        .otherwise(pl.col("_model"))
        .alias("cost_model"),
        pl.coalesce(pl.col("_mdtype"), first_dtype).alias("dtype"),
        (has | pl.col("_u")).alias("covered"),
        pl.col("_note").alias("cost_note"),
    ).select(*cols, "flops", "bytes", "cost_model", "dtype", "covered", "cost_note")


# ------------------------------------------------------------------ optimised == reference
@pytest.fixture(scope="module", params=TRACES)
def real_ops(request: pytest.FixtureRequest, shared_traces: Path) -> pl.DataFrame:
    return tracekit.load(str(shared_traces / request.param)).ops


def test_same_frame_as_reference_as_loaded(real_ops: pl.DataFrame) -> None:
    n = real_ops.height
    assert real_ops["op_id"].to_list() == list(range(n))  # the positional fast path is the one exercised
    out = op_costs(real_ops)
    assert_frame_equal(out, reference_op_costs(real_ops))
    # the comparison is not vacuous: both layers of count-once occur and some ops carry a cost
    assert out["flops"].is_not_null().sum() > 0
    assert {COUNTED_IN_CHILD, COUNTED_IN_PARENT} & set(out["cost_model"].drop_nulls().to_list())


def test_same_frame_as_reference_shuffled_and_two_traces(real_ops: pl.DataFrame) -> None:
    shuffled = real_ops.sample(fraction=1.0, shuffle=True, seed=7)  # op_id no longer the row number
    assert_frame_equal(op_costs(shuffled), reference_op_costs(shuffled))
    # sparse ids (too spread for the direct table): the integer-join fallback
    sparse = shuffled.with_columns(pl.col("op_id") * 1_000_003, pl.col("parent_id") * 1_000_003)
    assert_frame_equal(op_costs(sparse), reference_op_costs(sparse))
    # two traces with the same op ids (join path) and with disjoint ids that are the row numbers
    # (positional path checking the parent's trace_id)
    n = real_ops.height
    b = real_ops.with_columns(pl.lit("other").alias("trace_id"))
    for two in (
        pl.concat([real_ops, b]),
        pl.concat([real_ops, b.with_columns(pl.col("op_id") + n, pl.col("parent_id") + n)]),
    ):
        assert_frame_equal(op_costs(two), reference_op_costs(two))


def test_hash_collision_regroups_exactly(real_ops: pl.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    # every signature in one hash bucket: the string check must catch it and regroup exactly
    monkeypatch.setattr(
        costmodel, "_signature_hash", lambda keys: pl.Series("_h", [0] * keys.height, dtype=pl.UInt64())
    )
    assert_frame_equal(op_costs(real_ops), reference_op_costs(real_ops))


# ------------------------------------------------------------------ hand-built cases
def _table(rows: list[tuple[int, str, int | None, list | None, list[str] | None]], trace_id: str = "t") -> pl.DataFrame:
    df = pl.DataFrame(
        {
            "op_id": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "parent_id": [r[2] for r in rows],
            "input_dims": [json.dumps(r[3]) if r[3] is not None else None for r in rows],
            "input_types": [r[4] for r in rows],
            "concrete_inputs": [[""] * len(r[4] or []) for r in rows],
        },
        schema_overrides={"parent_id": pl.Int64(), "input_types": pl.List(pl.String())},
    )
    return conform(df, "ops", trace_id)


def test_collision_keeps_distinct_signatures_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        costmodel, "_signature_hash", lambda keys: pl.Series("_h", [0] * keys.height, dtype=pl.UInt64())
    )
    f32 = "float"
    out = op_costs(
        _table(
            [
                (0, "aten::mm", None, [[2, 3], [3, 4]], [f32, f32]),
                (1, "aten::mm", None, [[5, 6], [6, 7]], [f32, f32]),
                (2, "aten::mm", None, [[2, 3], [3, 4]], [f32, f32]),
            ]
        )
    )
    # 2·2·4·3 = 48 and 2·5·7·6 = 420, the repeat of the first signature gets 48 again
    assert out["flops"].to_list() == [48.0, 420.0, 48.0]


def test_first_dtype_position_walk() -> None:
    types = pl.Series(
        [
            ["Scalar", "", "c10::Half"],
            ["Scalar", "int"],
            [],
            None,
            ["TensorList", "long int"],
            ["c10::BFloat16"],
            ["Scalar", "Scalar"],
        ],
        dtype=pl.List(pl.String()),
    )
    assert costmodel._first_dtype(types).to_list() == ["fp16", "int32", None, None, "int64", "bf16", None]


def test_parent_rows_positional_and_joined() -> None:
    # ids are the row numbers: parent 0 of row 1 found by position; 7 is out of range -> null;
    # row 3's parent (row 2) belongs to another trace -> null
    rows = [(0, "a", None, None, None), (1, "b", 0, None, None), (2, "c", 7, None, None)]
    df = pl.concat([_table(rows, "t"), _table([(3, "d", 2, None, None)], "u")])
    assert costmodel._parent_rows(df).to_list() == [None, 0, None, None]
    # ids are not the row numbers: parents by id within the same trace
    df2 = pl.concat(
        [
            _table([(10, "a", None, None, None), (5, "b", 10, None, None)], "t"),
            _table([(10, "c", 5, None, None), (5, "d", None, None, None)], "u"),
        ]
    )
    assert costmodel._parent_rows(df2).to_list() == [None, 0, 3, None]
    # sparse ids (direct table would be too big) and a duplicated id (first row wins): joined
    df3 = _table([(10**12, "a", None, None, None), (5, "b", 10**12, None, None), (5, "c", 5, None, None)])
    assert costmodel._parent_rows(df3).to_list() == [None, 0, 1]
    df4 = _table([(1, "a", None, None, None), (1, "b", None, None, None), (2, "c", 1, None, None)])
    assert costmodel._parent_rows(df4).to_list() == [None, None, 0]
    # one trace whose ids count up from 100 in row order: parent row = parent id − 100 by arithmetic
    # (id 104 is no op -> null), the same UInt32 rows as the direct table gives for these ops reversed
    rows5 = [(100, "a", None, None, None), (101, "b", 100, None, None), (102, "c", 101, None, None)]
    df5 = _table([*rows5, (103, "d", 104, None, None)])
    got = costmodel._parent_rows(df5)
    assert got.dtype == pl.UInt32() and got.to_list() == [None, 0, 1, None]
    rev = costmodel._parent_rows(df5.reverse())  # ids 103..100: not ascending, the direct table
    assert rev.dtype == pl.UInt32() and rev.to_list() == [None, 2, 3, None]


def test_parent_cycle_terminates() -> None:
    # a cycle would be a loader bug; the walks stop after min(rows, _MAX_DEPTH) levels instead of hanging
    f32 = "float"
    out = op_costs(_table([(0, "aten::relu", 1, [[4]], [f32]), (1, "aten::relu", 0, [[4]], [f32])]))
    assert out.height == 2 and out["covered"].all()
