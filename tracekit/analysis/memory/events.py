"""The memory events an analysis reads: those of the device the trace's kernels ran on (the CPU's
for a CPU-only trace), in time order, each with the op that enclosed it on its thread (the
attribution's enclosing-interval rule, tracekit/tables/enclosing.py; the region only for the
peak's event, the one region shown), and what is odd
in them counted: totals missing or negative (left out of the timeline), frees of blocks the trace
never saw allocated, allocations at an address still live (a free not recorded), and each
allocation's fate (freed within the trace or still live at its end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.attribution.activities import cpu_regions
from tracekit.numbers import plural
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.gather import take

# Each event as the analysis reads it: the table's columns (trace_id dropped) plus these.
COLUMNS = {
    "time_ns": pl.Int64(),
    "bytes": pl.Int64(),
    "total_allocated": pl.Int64(),
    "total_reserved": pl.Int64(),
    "addr": pl.Int64(),
    "op": pl.String(),  # the innermost op enclosing the event on its thread (null: none)
    "usable": pl.Boolean(),  # total_allocated known and ≥ 0 (the timeline reads only these)
    "live_at_end": pl.Boolean(),  # an allocation with no free after it within the trace
}


@dataclass
class MemoryEvents:
    """The chosen device's events (:data:`COLUMNS`) and what was counted reading them."""

    events: pl.DataFrame
    device: str  # "cuda:1", "cpu"
    other_devices: dict[str, int] = field(default_factory=dict)  # events of devices not analysed
    peak_region: str | None = None  # the innermost CPU region holding the peak's event (only it is asked)
    notes: list[str] = field(default_factory=list)  # bad input, one line per kind (the analysis warns them)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.events.height == 0


def memory_events(
    memory: pl.DataFrame, kernels: pl.DataFrame, ops: pl.DataFrame, regions: pl.DataFrame, cpu_only: bool
) -> MemoryEvents:
    """The events of the device the kernels ran on (:func:`choose_device`), attributed and checked."""
    if memory.height == 0:
        return MemoryEvents(pl.DataFrame(schema=COLUMNS), "")
    key = _device_key(memory)
    device = choose_device(key, kernels, cpu_only)
    others = {str(k): int(n) for k, n in key.filter(key != device).value_counts().sort("count").iter_rows()}
    ev = memory.filter(key == device).sort("time_ns", maintain_order=True)
    ev = ev.with_columns(_enclosing(ev, ops, "op_id", "name").alias("op"))
    ev, counts = _checked(ev)
    usable = ev.filter(pl.col("usable"))
    region = None
    if usable.height:  # the peak's region: one point, not every event (the others are not shown)
        top = usable.slice(int(usable["total_allocated"].arg_max() or 0), 1)
        region = _enclosing(top, cpu_regions(regions), "region_id", "name")[0]
    return MemoryEvents(ev.select(list(COLUMNS)), device, others, region, _notes(counts), counts)


def _device_key(memory: pl.DataFrame) -> pl.Series:
    """``cuda:1``, ``cpu`` (the CPU's id, −1, is left out), ``type 9:0`` for each event."""
    kind = memory["device_type"].fill_null("unknown")
    return pl.select(
        pl.when(kind == "cpu")
        .then(pl.lit("cpu"))
        .otherwise(pl.format("{}:{}", pl.lit(kind), pl.lit(memory["device_id"]).fill_null(-1)))
        .alias("device")
    ).to_series()


def choose_device(key: pl.Series, kernels: pl.DataFrame, cpu_only: bool) -> str:
    """The device whose memory is reported: the CPU for a CPU-only trace; else the accelerator the
    most kernels ran on, when events name it; else the accelerator with the most events (the CPU
    when none has any)."""
    counts = key.value_counts().sort(["count", "device"], descending=[True, False])
    devices = counts["device"].to_list()
    if cpu_only:
        return "cpu" if "cpu" in devices else str(devices[0])
    accel = [d for d in devices if d != "cpu"]
    if not accel:
        return "cpu"
    if kernels.height and "device" in kernels.columns:
        top = kernels["device"].drop_nulls().value_counts().sort(["count", "device"], descending=[True, False])
        if top.height:
            want = int(top["device"][0])
            named = [d for d in accel if d.rsplit(":", 1)[-1] == str(want)]
            if named:
                return named[0]
    return accel[0]


def _enclosing(ev: pl.DataFrame, intervals: pl.DataFrame, id_col: str, name: str) -> pl.Series:
    """The ``name`` of the innermost interval of each event's thread that holds it (null: none)."""
    need = {"pid", "tid", "start_ns", "end_ns", "parent_id", id_col, name}
    if ev.height == 0 or intervals.height == 0 or not need <= set(intervals.columns):
        return pl.repeat(None, ev.height, dtype=pl.String(), eager=True)
    iv = intervals.select(sorted(need | ({"depth"} & set(intervals.columns))))
    rows = innermost_rows(ev, iv, ["pid", "tid"], id_col, t="time_ns")
    return take(iv[name].cast(pl.String()), rows)


def _checked(ev: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """``usable`` and ``live_at_end`` added; the odd events counted. An allocation's fate is its
    address's next event: a free (freed), another allocation (reused: its free was not recorded,
    and it counts as freed there) or none (live at the end)."""
    i = pl.int_range(pl.len(), dtype=pl.Int64).alias("_i")
    by_addr = (
        ev.with_columns(i)
        .lazy()
        .filter(pl.col("addr").is_not_null())
        .sort("addr", "_i")
        .with_columns(
            pl.col("bytes").shift(-1).over("addr").alias("_next"),
            pl.col("bytes").shift(1).over("addr").alias("_prev"),
        )
        .select(
            "_i",
            ((pl.col("bytes") > 0) & pl.col("_next").is_null()).alias("live_at_end"),
            ((pl.col("bytes") > 0) & (pl.col("_next") > 0)).alias("_reused"),
            ((pl.col("bytes") < 0) & ~(pl.col("_prev") > 0).fill_null(False)).alias("_orphan"),
        )
    )
    out = (
        ev.lazy()
        .with_columns(i)
        .join(by_addr, on="_i", how="left", maintain_order="left")
        .with_columns(
            (pl.col("total_allocated").is_not_null() & (pl.col("total_allocated") >= 0)).alias("usable"),
            pl.col("live_at_end").fill_null(False),
        )
        .collect(engine="in-memory")
    )
    tot, res = pl.col("total_allocated"), pl.col("total_reserved")
    counts = out.select(
        tot.is_null().sum().alias("total_missing"),
        (tot < 0).sum().alias("total_negative"),
        (res < 0).sum().alias("reserved_negative"),
        pl.col("_orphan").fill_null(False).sum().alias("free_without_allocation"),
        pl.col("_reused").fill_null(False).sum().alias("address_reused"),
        pl.col("addr").is_null().sum().alias("address_missing"),
        pl.col("bytes").is_null().sum().alias("bytes_missing"),
    ).row(0, named=True)
    return out.drop("_i", "_reused", "_orphan"), {k: int(v or 0) for k, v in counts.items()}


_SAID = {
    "total_missing": "without a total allocated (left out of the timeline)",
    "total_negative": "with a negative total allocated (left out of the timeline)",
    "reserved_negative": "with a negative total reserved",
    "free_without_allocation": "free blocks the trace never saw allocated (allocated before it began)",
    "address_reused": "allocate at an address still live (its free was not recorded)",
    "address_missing": "without an address (their frees cannot be matched)",
    "bytes_missing": "without a size",
}


def _notes(counts: dict[str, int]) -> list[str]:
    """One warning per kind of bad input (frees of blocks allocated before the trace began are
    normal: counted, not warned)."""
    return [
        f"memory: {n:,} {plural(n, 'event')} {_SAID[k]}"
        for k, n in counts.items()
        if n and k != "free_without_allocation"
    ]


def summary_counts(m: MemoryEvents) -> dict[str, Any]:
    """The counts the result carries (every kind, zeros included)."""
    return {"events": m.events.height, **m.counts, "other_devices": m.other_devices}
