"""Decoded Kineto event batches → canonical tables.

Each batch is routed by (ph, cat) in one pass (the routes: ``routes.py``); each table then takes
its columns from its own events with one list comprehension per field and one polars call per
column (``frames.py``). ``Collector.finish_each`` concatenates the batches, adds the time base, drops
bad events (counted by reason), removes duplicates and nests ops/regions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from operator import attrgetter
from typing import Any

import polars as pl

from tracekit.tables import schema
from tracekit.tables.staging import writing
from tracekit.sources.kineto.reading import columns as kc
from tracekit.sources.kineto.reading.finish import finish_parts, finish_table, in_file_order
from tracekit.sources.kineto.reading.frames import attr_list, built_frame, native_frame, prepare
from tracekit.sources.kineto.reading.native import Window
from tracekit.sources.kineto.reading.memory import built_memory, finish_memory, memory_parts
from tracekit.sources.kineto.routes import FLOW, LAUNCH_FLOW_CATS, MEMORY, META, ROUTE_PH_CAT, TABLE_NAMES

_PH_CAT = attrgetter("ph", "cat")
MAX_THREADS = 4096
PENDING_ROWS = 1 << 17  # native-scanner rows built per polars pass (bounded memory, few calls)


class Collector:
    """Accumulates per-batch frames; ``dropped`` counts bad events, ``skipped`` events of kinds
    the canonical tables do not model, ``notes`` values that were coerced but kept."""

    def __init__(self, spill_dir: Path | None = None) -> None:
        # Built table batches: kept in memory, or (spill_dir) written there as Arrow IPC files
        # and read back one table at a time by finish_each (bounded-memory ingest).
        self.frames: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLE_NAMES}
        self.spill_dir = spill_dir
        self.spilled: dict[str, list[Path]] = {t: [] for t in (*TABLE_NAMES, "memory")}
        self.flow_counts: Counter[tuple[str, str]] = Counter()  # (cat, ph) of flow events
        self.flow_ids: list[pl.Series] = []  # ids of CPU→GPU launch flows (= launch correlations)
        self.flow_cats: set[str] = set()  # launch-flow categories seen
        self.dropped: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()
        self.threads: dict[tuple[Any, ...], int] = {}  # (kind, pid, tid, name) → ordinal of first sight
        self.events_read = 0
        self.ordinal = 0  # events seen, in file order: each table row keeps its ordinal as _ev
        # Native windows not built yet: (frame, the window's first ordinal) per table; flows; metadata.
        self.pending: dict[str, list[tuple[pl.DataFrame, int]]] = {t: [] for t in TABLE_NAMES}
        self.pending_flows: list[tuple[pl.DataFrame, int]] = []  # the window's first ordinal unused
        self.pending_meta: list[tuple[pl.DataFrame, int]] = []
        self.pending_rows = 0
        # [memory] events: built frames (``_ev`` in file order) and native windows not built yet
        self.memory: list[pl.DataFrame] = []
        self.pending_memory: list[tuple[pl.DataFrame, int]] = []

    def add(self, evs: list[Any], ordinals: list[int] | None = None) -> None:
        """Route one decoded batch by (ph, cat) — vectorised — and build its table frames.
        ``ordinals`` (file order) default to the next ``len(evs)`` ones."""
        if ordinals is None:
            ordinals = list(range(self.ordinal, self.ordinal + len(evs)))
            self.ordinal += len(evs)
        if None in evs:  # events that failed validation (counted in ``dropped``) keep their index
            kept = [(e, o) for e, o in zip(evs, ordinals) if e is not None]
            evs, ordinals = [e for e, _ in kept], [o for _, o in kept]
        if not evs:
            return
        self._flush_meta()
        self.events_read += len(evs)
        # One pass in Python: a dict lookup per event is cheaper than building and routing a key frame.
        buckets: list[list[Any]] = [[] for _ in range(MEMORY + 2)]
        order: list[list[int]] = [[] for _ in range(MEMORY + 2)]
        route, unrouted = ROUTE_PH_CAT.get, MEMORY + 1
        for e, r, o in zip(evs, map(route, map(_PH_CAT, evs)), ordinals):
            i = (META if e.ph == "M" else unrouted) if r is None else r
            buckets[i].append(e)
            order[i].append(o)
        for rows in buckets[FLOW:]:
            for (p, c), n in Counter(map(_PH_CAT, rows)).items():
                self.skipped[f"{c if c is not None else '-'} [{p}]"] += n
        for i, rows in enumerate(buckets[:unrouted]):
            if not rows:
                continue
            if i < len(TABLE_NAMES):
                name = TABLE_NAMES[i]
                cats = pl.Series("cat", attr_list(rows, "cat"), dtype=pl.String())
                frame = built_frame(name, rows, cats, self.notes).with_columns(
                    pl.Series("_ev", order[i], dtype=pl.Int64())
                )
                self._append(name, prepare(frame, name, self.dropped))
            elif i == FLOW:
                self._add_flows(
                    pl.DataFrame(
                        {
                            "cat": pl.Series(attr_list(rows, "cat"), dtype=pl.String()),
                            "ph": pl.Series(attr_list(rows, "ph"), dtype=pl.String()),
                            "id": kc.ints(attr_list(rows, "id"), "flow id", self.notes),
                        }
                    )
                )
            elif i == MEMORY:
                self._add_memory(built_memory(rows, order[i], self.notes))
            elif len(self.threads) < MAX_THREADS:
                self._metadata(rows, order[i])

    def add_native(self, w: Window, base: int) -> None:
        """Take one window from the native scanner (``_ev`` counts from ``base``) — the same
        tables, columns and counts as :meth:`add` gives for the same events. Its frames wait
        (table rows, flows, metadata alike) until :data:`PENDING_ROWS` rows of many windows are
        built together: polars' cost per call dominates small frames."""
        self.events_read += w.elements - len(w.slow)
        for ph, cat, n in w.pairs:
            self.skipped[f"{cat if cat is not None else '-'} [{ph}]"] += n
        for name, frame in zip(TABLE_NAMES, w.groups):
            if frame.height:
                self.pending[name].append((frame, base))
                self.pending_rows += frame.height
        for i, pending in ((FLOW, self.pending_flows), (META, self.pending_meta), (MEMORY, self.pending_memory)):
            if w.groups[i].height:
                pending.append((w.groups[i], base))
                self.pending_rows += w.groups[i].height
        if self.pending_rows >= PENDING_ROWS:
            self._build_pending()

    def _build_pending(self) -> None:
        """Build the pending native frames, many windows at once: per table one query that
        offsets each window's ``_ev`` and concatenates them; the flows and the metadata events
        of all those windows in one pass each."""
        self._flush_meta()
        self._flush_flows()
        for name in TABLE_NAMES:
            if self.pending[name]:
                df = _offset_concat(self.pending[name])
                self._append(name, prepare(native_frame(name, df), name, self.dropped).rechunk())
        self.pending = {t: [] for t in TABLE_NAMES}
        if self.pending_memory:
            self._add_memory(_offset_concat(self.pending_memory).rechunk())
            self.pending_memory = []
        self.pending_rows = 0

    def _flush_flows(self) -> None:
        if self.pending_flows:
            self._add_flows(pl.concat([f for f, _ in self.pending_flows], rechunk=False))
            self.pending_flows = []

    def _flush_meta(self) -> None:
        """Thread and process names of the pending native metadata events, in file order (done
        before the Python path adds any, so the first sight of each name keeps its place)."""
        if not self.pending_meta:
            return
        meta = _offset_concat(self.pending_meta, pl.col("name").is_in(["process_name", "thread_name"]))
        self.pending_meta = []
        for *key, ev in meta.select("name", "pid", "tid", "arg_name", "_ev").iter_rows():
            if len(self.threads) >= MAX_THREADS:
                break
            self.threads.setdefault(tuple(key), ev)

    def thread_names(self) -> list[tuple[Any, ...]]:
        """(kind, pid, tid, name) of the process/thread name events, in file order."""
        self._flush_meta()
        return sorted(self.threads, key=self.threads.__getitem__)

    def _metadata(self, rows: list[Any], ordinals: list[int]) -> None:
        for e, ev in zip(rows, ordinals):
            if e.name in ("process_name", "thread_name"):
                label = e.args.name
                key = (e.name, e.pid, e.tid, label if isinstance(label, str) else None)
                try:
                    self.threads.setdefault(key, ev)
                except TypeError:  # an unhashable pid/tid
                    self.notes["metadata event: unhashable pid/tid"] += 1
                if len(self.threads) >= MAX_THREADS:
                    return

    def _add_memory(self, frame: pl.DataFrame) -> None:
        if self.spill_dir is None:
            self.memory.append(frame)
        else:
            self._append("memory", frame)

    def _append(self, name: str, frame: pl.DataFrame) -> None:
        if self.spill_dir is None:
            self.frames[name].append(frame)
            return
        path = self.spill_dir / f"{name}-{len(self.spilled[name]):06d}.arrow"
        with writing(self.spill_dir.parent.parent):  # the dataset's disk, not the input, failed
            frame.write_ipc(path, compression="uncompressed")
        self.spilled[name].append(path)

    def _add_flows(self, flows: pl.DataFrame) -> None:
        for c, p, n in flows.group_by("cat", "ph").len().iter_rows():
            self.flow_counts[(c, p)] += n
        launch = flows.filter(pl.col("cat").is_in(list(LAUNCH_FLOW_CATS)))
        self.flow_cats.update(launch["cat"].unique().to_list())
        self.flow_ids.append(launch["id"].drop_nulls())

    def launch_flow_ids(self) -> pl.Series:
        """Distinct ids of the CPU→GPU launch flows (each is a launch correlation id), sorted."""
        self._flush_flows()
        ids = pl.concat([pl.Series("id", [], dtype=pl.Int64()), *self.flow_ids]).unique().sort()
        self.flow_ids = [ids]  # kept once, distinct and sorted (what is asked again gives the same)
        return ids

    def finish_each(self, base_ns: int, trace_id: str) -> Iterator[tuple[str, pl.DataFrame]]:
        """Table by table: concatenate its batches (read back when spilled), drop duplicates,
        add the time base, nest. Only one table's batches are held at a time."""
        self._build_pending()
        for name in TABLE_NAMES:
            yield name, self._finish(name, base_ns, trace_id, self.dropped)
        yield "memory", self._finish_memory(base_ns, trace_id)

    def finish_in_parts(self, base_ns: int, trace_id: str) -> Iterator[tuple[str, Iterator[pl.DataFrame]]]:
        """As :meth:`finish_each`, each table in parts (read the parts of one table before asking
        for the next): a spilled table in file order is finished from a slim read of it, then one
        file at a time (``reading/finish.py``), never held whole; others as one part."""
        self._build_pending()
        for name in TABLE_NAMES:
            files = self.spilled[name]
            if files and not self.frames[name] and in_file_order(files):
                self.spilled[name] = []
                parts = finish_parts(files, name, base_ns, self.dropped)
                yield name, (schema.conform(p, name, trace_id) for p in parts)
            else:
                yield name, iter([self._finish(name, base_ns, trace_id, self.dropped)])
        files, self.spilled["memory"] = self.spilled["memory"], []
        yield "memory", memory_parts(files, base_ns, trace_id, self.dropped)

    def _finish_memory(self, base_ns: int, trace_id: str) -> pl.DataFrame:
        parts = [m.sort("_ev") if not m["_ev"].is_sorted() else m for m in self.memory]
        self.memory = []
        return finish_memory(parts, base_ns, trace_id, self.dropped)

    def _finish(self, name: str, base_ns: int, trace_id: str, dropped: Counter[str]) -> pl.DataFrame:
        parts = self.frames[name] or [pl.read_ipc(f) for f in self.spilled[name]]
        self.frames[name] = []
        for f in self.spilled[name]:
            f.unlink()
        self.spilled[name] = []
        if not parts:
            return schema.empty(name).with_columns(pl.lit(trace_id, dtype=pl.String()).alias("trace_id"))
        df = pl.concat(parts, how="vertical_relaxed", rechunk=False)
        del parts
        if not df["_ev"].is_sorted():  # events the native scanner left to Python came later
            df = df.sort("_ev")
        # regions keep it: `tracekit label` patches each region's own event by this index
        df = df.rename({"_ev": "event_index"}) if name == "regions" else df.drop("_ev")
        return schema.conform(finish_table(df, name, base_ns, dropped), name, trace_id)


def _offset_concat(parts: list[tuple[pl.DataFrame, int]], keep: pl.Expr | None = None) -> pl.DataFrame:
    """The frames of ``parts`` one after another, each ``_ev`` offset by its window's first
    ordinal (rows where ``keep`` holds, when given): one query however many windows."""
    lazy = [f.lazy().with_columns(pl.col("_ev") + base) for f, base in parts]
    out = pl.concat(lazy, how="vertical", rechunk=False)
    return (out if keep is None else out.filter(keep)).collect(engine="in-memory")  # not the streaming default
