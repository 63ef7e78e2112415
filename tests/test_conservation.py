"""Conservation against the source tables: the analysis accounts for every device activity the
loader read, to the ns — compared with the kernels table itself, not with the analysis' own frame
split two ways (which is what ``totals.conserved`` checks and why it cannot be False)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from conftest import kineto_trace_files, nsys_export_files

import tracekit
from tracekit.analysis import analyze

BIG = ("mtia_rank_0", "df_index_resolver")  # analysed in full by test_label's round trip already


@pytest.mark.parametrize(
    "path",
    [*(p for p in kineto_trace_files() if not p.name.startswith(BIG)), *nsys_export_files()],
    ids=lambda p: p.name[:40],
)
def test_device_time_conserved_against_the_kernels_table(path: Path) -> None:
    tr = tracekit.load(str(path))
    res = analyze(tr)
    t = res.totals
    un = res.unattributed
    if tr.is_cpu_only:  # leaf CPU ops stand in for kernels: at least the count of work is checked
        assert t["activity_count"] > 0 and t["attributed_ns"] + t["unattributed_ns"] == t["device_time_ns"]
        return
    # Straight from the loader's table: every activity once, durations summed in integer ns.
    source_ns = int(tr.kernels.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item())
    assert t["activity_count"] == tr.kernels.height
    assert t["device_time_ns"] == source_ns
    assert t["attributed_ns"] + t["unattributed_ns"] == source_ns
    # The unattributed time, by reason, is the same time.
    assert (int(un["time_ns"].sum()) if un.height else 0) == t["unattributed_ns"]
    # Phase units are disjoint: together they never hold more device time than the trace has
    # (a phase-less trace's "<whole trace>" unit holds all of it, unattributed time included).
    if res.phases.height:
        assert int(res.phases["device_time_ns"].fill_null(0).sum()) <= source_ns
