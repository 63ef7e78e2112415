"""The analysis's biggest transients bounded (issue 36): region metrics and each region's thread
and device computed one block of whole regions at a time (regions/blocks.py), and the launch-free
times by one running maximum instead of a per-stream window.
Each must give the same numbers as the whole-frame form: by hand, and on shared traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis.idle import causes
from tracekit.analysis.idle.causes import launch_free
from tracekit.analysis.regions import rollup
from tracekit.analysis.regions import blocks
from tracekit.analysis.regions.blocks import region_blocks


def test_region_blocks_by_hand() -> None:
    # links per region: 1→2, 2→1, 3→3, 4→1, 5→3, 7→1 (and one null). Rows before each region, in id
    # order: 0, 2, 3, 6, 7, 10; // 3 gives blocks 0, 0, 1, 2, 2, 3: regions {1, 2}, {3}, {4, 5}, {7}.
    # A region never splits; the null row is in no block.
    ids = pl.Series("region_id", [5, 1, 1, 2, None, 3, 3, 3, 4, 5, 5, 7])
    blocks = [ids.filter(m).to_list() for m in region_blocks(ids, 3)]
    assert blocks == [[1, 1, 2], [3, 3, 3], [5, 4, 5, 5], [7]]


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/hta/trace_diff/test/test.json.gz",
        "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    ],
)
def test_region_metrics_by_block_equal_all_at_once(
    shared_traces: Path, rel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With blocks of 64 links these traces' region metrics are computed in 67 and 22 blocks (one
    # call of the metrics each, against one call for all 36,900 and 14,535 links with the default
    # block); every figure of the document must stay as the one-block computation gives it.
    trace = tracekit.load(str(shared_traces / rel))
    whole = analyze(trace).to_json_bytes()
    sizes: list[int] = []
    real = rollup.group_metrics

    def counted(acts: pl.DataFrame, key: str) -> pl.DataFrame:
        sizes.append(acts.height)
        return real(acts, key)

    monkeypatch.setattr(blocks, "CHUNK_ROWS", 64)
    monkeypatch.setattr(rollup, "group_metrics", counted)
    assert analyze(trace).to_json_bytes() == whole
    assert len(sizes) >= 20, sizes


def _acts(rows: list[tuple[int, int | None, int, int, int, int | None]]) -> pl.DataFrame:
    names = ["act_id", "device", "stream", "start_ns", "end_ns", "launch_end_ns"]
    df = pl.DataFrame(rows, schema=names, orient="row")
    return df.with_columns(pl.col("launch_end_ns").alias("launch_start_ns"))


@pytest.mark.parametrize("packed", [True, False])
def test_launch_free_by_hand_with_streams_interleaved(packed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # packed: as on a trace over CHUNK_ROWS activities (one running maximum over shifted streams);
    # else the per-stream window a small trace uses. The same figures either way:
    # device 0 stream 7: acts 0 (100–400), 2 (300–350), 4 (500–600); device 0 stream 8: act 1
    # (200–900), act 3 (950–1000); device null stream 7 (its own stream: null device = -1): act 5.
    # free = min(start, max(launch end, latest end of the stream's earlier work)):
    #   act 0: first on its stream → its launch end 50;  act 2: max(250, 400) = 400 → min(300, 400) = 300
    #   act 4: max(450, max(400, 350)) = 450;            act 1: first → 150
    #   act 3: max(920, 900) = 920;                      act 5: first on (-1, 7) → 10 (not 400 or 900)
    #   act 6 has no launch: no row.
    acts = _acts(
        [
            (0, 0, 7, 100, 400, 50),
            (1, 0, 8, 200, 900, 150),
            (2, 0, 7, 300, 350, 250),
            (3, 0, 8, 950, 1000, 920),
            (4, 0, 7, 500, 600, 450),
            (5, None, 7, 700, 800, 10),
            (6, 0, 7, 650, 660, None),
        ]
    )
    if packed:
        monkeypatch.setattr(causes, "CHUNK_ROWS", 0)
    got = dict(launch_free(acts, None).iter_rows())
    assert got == {0: 50, 2: 300, 4: 450, 1: 150, 3: 920, 5: 10}


def test_launch_free_window_when_times_cannot_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    # Four streams over 2**61 ns: 4 × (2**61 + 9 − 40 + 1) ≥ 2**62, so the streams cannot be
    # shifted apart in one int64 (stream 4, the fourth in order, would pass 2**63) and the
    # per-stream window is used. Streams 1–3: acts 2, 3, 4 are first: their launch ends 20, 45, 65.
    # Stream 4: act 0 ends at 2**61; act 1 (launched at 10) waits for it:
    # min(2**61 + 5, max(10, 2**61)) = 2**61.
    monkeypatch.setattr(causes, "CHUNK_ROWS", 0)  # as on a big trace
    big = 2**61
    acts = _acts(
        [
            (0, 0, 4, 0, big, 0),
            (1, 0, 4, big + 5, big + 9, 10),
            (2, 0, 1, 30, 40, 20),
            (3, 0, 2, 50, 60, 45),
            (4, 0, 3, 70, 80, 65),
        ]
    )
    assert dict(launch_free(acts, None).iter_rows()) == {0: 0, 1: big, 2: 20, 3: 45, 4: 65}
