"""The region closure (tracekit/attribution/links.py): row counts and nearest ancestors on small
hand-built trees, each answer derived in a comment; and that the readers of the closure build it
only for the regions that hold activities (issue 36: a 10 MB trace of 100,000 regions nested 250
deep held the 12.5 M-row closure of every region, five times)."""

from __future__ import annotations

import polars as pl

from tracekit.analysis.regions.rollup import phase_units
from tracekit.analysis.regions.tops import region_closure
from tracekit.attribution.links import ancestors, nearest_ancestor


def _tree(parents: dict[int, int | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {"region_id": list(parents), "parent_id": list(parents.values())},
        schema={"region_id": pl.Int64(), "parent_id": pl.Int64()},
    )


# 1 ─ 2 ─ 3 ─ 4     (4 is three levels below 1)
#  └─ 5             (5 directly under 1)
# 6                 (a second root, alone)
TREE = _tree({1: None, 2: 1, 3: 2, 4: 3, 5: 1, 6: None})


def test_ancestors_rows_are_each_region_times_its_depth() -> None:
    # every region: 1 + 2 + 3 + 4 (the chain) + 2 (region 5) + 1 (region 6) = 13 rows
    assert ancestors(TREE).height == 13
    # only region 4: itself and its three ancestors, nearest first
    four = ancestors(TREE, pl.Series([4])).sort("level")
    assert four.rows() == [(4, 4, 0), (4, 3, 1), (4, 2, 2), (4, 1, 3)]
    # regions 5 and 6: (5, 5, 0), (5, 1, 1), (6, 6, 0)
    assert ancestors(TREE, pl.Series([5, 6])).sort("region_id", "level").rows() == [(5, 5, 0), (5, 1, 1), (6, 6, 0)]


def test_nearest_ancestor() -> None:
    hit = pl.Series([1, 3])
    # at or above: 1→1 (0), 2→1 (1), 3→3 (0), 4→3 (1), 5→1 (1); 6 has none
    assert nearest_ancestor(TREE, hit).rows() == [(1, 1, 0), (2, 1, 1), (3, 3, 0), (4, 3, 1), (5, 1, 1)]
    # strictly above (min_level 1), of 3 and 4 only: 3→1 (2 levels up), 4→3 (1)
    assert nearest_ancestor(TREE, hit, of=pl.Series([3, 4]), min_level=1).rows() == [(3, 1, 2), (4, 3, 1)]
    # fewer than two levels up (max_level 2), hit 1 only: 2→1 (1); 3 and 4 are 2 and 3 levels below it
    assert nearest_ancestor(TREE, pl.Series([1]), of=pl.Series([2, 3, 4]), max_level=2).rows() == [(2, 1, 1)]


def test_nearest_ancestor_equals_the_closure_cut_to_the_first_hit() -> None:
    # a forest of 40 chains, 30 deep, every 7th region a hit: the walk holds one row per region,
    # the closure 40 × (1 + ... + 30) = 18,600; their answers agree
    parents = {c * 100 + d: (c * 100 + d - 1 if d else None) for c in range(40) for d in range(30)}
    tree = _tree(parents)
    assert ancestors(tree).height == 40 * 30 * 31 // 2
    hit = pl.Series([r for r in parents if r % 7 == 0])
    want = (
        ancestors(tree)
        .filter(pl.col("ancestor_id").is_in(hit.implode()))
        .sort("region_id", "level")
        .unique("region_id", keep="first", maintain_order=True)
    )
    assert nearest_ancestor(tree, hit).equals(want)


def test_closure_of_a_deep_chain_is_its_innermost_region_times_depth() -> None:
    # 250 regions nested in one chain, two phased (0: prefill, 5: decode, nested in it); one
    # activity in the innermost region (249). The tops' closure: region 249 with its 249
    # ancestors = 250 rows (the closure of every region would be 1 + ... + 250 = 31,375)
    depth = 250
    regions = pl.DataFrame(
        {
            "region_id": list(range(depth)),
            "parent_id": [None, *range(depth - 1)],
            "phase": ["prefill" if d == 0 else "decode" if d == 5 else "other" for d in range(depth)],
        },
        schema={"region_id": pl.Int64(), "parent_id": pl.Int64(), "phase": pl.String()},
    )
    acts = pl.DataFrame({"region_id": [depth - 1, None]}, schema={"region_id": pl.Int64()})
    closure = region_closure(regions, acts)
    assert closure.height == depth
    assert closure["_leaf"].unique().to_list() == [depth - 1]
    assert sorted(closure["region_id"]) == list(range(depth))
    # the decode region is nested in the prefill one: only region 0 counts as a phase unit
    assert phase_units(regions).to_list() == [0]
