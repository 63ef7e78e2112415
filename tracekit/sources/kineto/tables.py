"""Decoded Kineto event batches → canonical tables.

Each batch is routed by (ph, cat) in one pass; each table then takes its columns from its own
events with one list comprehension per field and one polars call per column. Times stay as text
until ``ns_from_raw`` converts them exactly. ``Collector.finish`` concatenates the batches, adds
the time base, drops bad events (counted by reason), removes duplicates and nests ops/regions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from operator import attrgetter
from typing import Any

import msgspec
import polars as pl

from tracekit.tables import schema
from tracekit.tables.staging import writing
from tracekit.sources.kineto import columns as kc
from tracekit.sources.kineto import elements
from tracekit.sources.kineto.finish import DEDUPE_KEYS, TIME_LIMIT_NS, WHAT, finish_table
from tracekit.sources.kineto.native import Window

# Category → table. Old (≤ 2021) names map to the same tables.
KERNEL_CATS = {
    "kernel": schema.KIND_KERNEL,
    "Kernel": schema.KIND_KERNEL,
    "gpu_memcpy": schema.KIND_MEMCPY,
    "Memcpy": schema.KIND_MEMCPY,
    "gpu_memset": schema.KIND_MEMSET,
    "Memset": schema.KIND_MEMSET,
}
LAUNCH_CATS = {"cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "driver", "Driver": "driver"}
OP_CATS = {"cpu_op": "cpu_op", "Operator": "cpu_op"}
REGION_CATS = {
    "user_annotation": schema.REGION_USER,
    "User": schema.REGION_USER,
    "gpu_user_annotation": schema.REGION_GPU_USER,
}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "fwdbwd"}
# Flows that link a CPU launch to its device activity; their id is the launch correlation.
LAUNCH_FLOW_CATS = {"ac2g", "async_cpu_to_gpu"}
_ROUTE: dict[str, int] = {
    **{c: 0 for c in KERNEL_CATS},
    **{c: 1 for c in LAUNCH_CATS},
    **{c: 2 for c in OP_CATS},
    **{c: 3 for c in REGION_CATS},
}
TABLE_NAMES = ("kernels", "launches", "ops", "regions")
_FLOW, _META = 4, 5
# (ph, cat) → table index or _FLOW; other "M" events are _META, everything else unrouted.
_ROUTE_PH_CAT: dict[tuple[str | None, str | None], int] = {
    **{("X", c): i for c, i in _ROUTE.items()},
    **{(p, c): _FLOW for c in FLOW_CATS for p in "sft"},
}
_PH_CAT = attrgetter("ph", "cat")
MAX_THREADS = 4096
PENDING_ROWS = 1 << 17  # native-scanner rows built per polars pass (bounded memory, few calls)
# Each table's columns after name/pid/tid/ts/dur, for both builders: (column, kind, attribute
# of the msgspec ``Args`` struct). The native scanner's field is the column without its leading
# "_" (kineto_native.STR_FIELDS / INT_FIELDS). Kinds: "cat" the event's category, "int" an
# integer (coercions counted), "raw" JSON text, "strlist" a list of strings.
TABLE_SPECS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "kernels": (
        ("_cat", "cat", ""),
        ("correlation", "int", "correlation"),
        ("external_id", "int", "external_id"),
        ("device", "int", "device"),
        ("stream", "int", "stream"),
        ("registers_per_thread", "int", "registers"),
        ("shared_memory", "int", "shared_memory"),
        ("bytes", "int", "nbytes"),
        ("graph_id", "int", "graph_id"),
        ("_grid", "raw", "grid"),
        ("_block", "raw", "block"),
    ),
    "launches": (("_cat", "cat", ""), ("correlation", "int", "correlation"), ("external_id", "int", "external_id")),
    "ops": (
        ("external_id", "int", "external_id"),
        ("sequence_number", "int", "seq"),
        ("input_dims", "raw", "input_dims"),
        ("input_strides", "raw", "input_strides"),
        ("input_types", "strlist", "input_types"),
        ("concrete_inputs", "strlist", "concrete"),
    ),
    "regions": (
        ("_cat", "cat", ""),
        ("external_id", "int", "external_id"),
        ("_device", "int", "device"),
        ("_stream", "int", "stream"),
    ),
}
_COMMON_FIELDS = ("name", "pid", "tid", "ts_ns", "dur_ns")
# Fields the native scanner builds per group (the four tables, flows, metadata).
NATIVE_COLUMNS = (
    *((*_COMMON_FIELDS, *(c.lstrip("_") for c, _, _ in TABLE_SPECS[t]), "_ev") for t in TABLE_NAMES),
    ("cat", "ph", "id"),
    ("name", "pid", "tid", "arg_name", "_ev"),
)
X_ROUTES = _ROUTE


class Collector:
    """Accumulates per-batch frames; ``dropped`` counts bad events, ``skipped`` events of kinds
    the canonical tables do not model, ``notes`` values that were coerced but kept."""

    def __init__(self, spill_dir: Path | None = None) -> None:
        # Built table batches: kept in memory, or (spill_dir) written there as Arrow IPC files
        # and read back one table at a time by finish_each (bounded-memory ingest).
        self.frames: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLE_NAMES}
        self.spill_dir = spill_dir
        self.spilled: dict[str, list[Path]] = {t: [] for t in TABLE_NAMES}
        self.flow_counts: Counter[tuple[str, str]] = Counter()  # (cat, ph) of flow events
        self.flow_ids: list[pl.Series] = []  # ids of CPU→GPU launch flows (= launch correlations)
        self.flow_cats: set[str] = set()  # launch-flow categories seen
        self.dropped: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()
        self.threads: dict[tuple[Any, ...], int] = {}  # (kind, pid, tid, name) → ordinal of first sight
        self.events_read = 0
        self.ordinal = 0  # events seen, in file order: each table row keeps its ordinal as _ev
        self.pending: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLE_NAMES}  # native, not built yet
        self.pending_rows = 0

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
        self.events_read += len(evs)
        # One pass in Python: a dict lookup per event is cheaper than building and routing a key frame.
        buckets: list[list[Any]] = [[] for _ in range(len(TABLE_NAMES) + 3)]
        order: list[list[int]] = [[] for _ in range(len(TABLE_NAMES) + 3)]
        route, unrouted = _ROUTE_PH_CAT.get, len(TABLE_NAMES) + 2
        for e, r, o in zip(evs, map(route, map(_PH_CAT, evs)), ordinals):
            i = (_META if e.ph == "M" else unrouted) if r is None else r
            buckets[i].append(e)
            order[i].append(o)
        for rows in buckets[_FLOW:]:
            for (p, c), n in Counter(map(_PH_CAT, rows)).items():
                self.skipped[f"{c if c is not None else '-'} [{p}]"] += n
        for i, rows in enumerate(buckets[:unrouted]):
            if not rows:
                continue
            if i < len(TABLE_NAMES):
                name = TABLE_NAMES[i]
                cats = pl.Series("cat", _get(rows, "cat"), dtype=pl.String())
                frame = _built(name, rows, cats, self.notes).with_columns(pl.Series("_ev", order[i], dtype=pl.Int64()))
                self._append(name, _prepare(frame, name, self.dropped))
            elif i == _FLOW:
                self._add_flows(
                    pl.DataFrame(
                        {
                            "cat": pl.Series(_get(rows, "cat"), dtype=pl.String()),
                            "ph": pl.Series(_get(rows, "ph"), dtype=pl.String()),
                            "id": kc.ints(_get(rows, "id"), "flow id", self.notes),
                        }
                    )
                )
            elif len(self.threads) < MAX_THREADS:
                self._metadata(rows, order[i])

    def add_native(self, w: Window, base: int) -> None:
        """Take one window from the native scanner (``_ev`` counts from ``base``) — the same
        tables, columns and counts as :meth:`add` gives for the same events."""
        self.events_read += w.elements - len(w.slow)
        for ph, cat, n in w.pairs:
            self.skipped[f"{cat if cat is not None else '-'} [{ph}]"] += n
        for name, frame in zip(TABLE_NAMES, w.groups):
            if frame.height:
                self.pending[name].append(frame.with_columns(pl.col("_ev") + base))
                self.pending_rows += frame.height
        if w.groups[_FLOW].height:
            self._add_flows(w.groups[_FLOW])
        meta = w.groups[_META].filter(pl.col("name").is_in(["process_name", "thread_name"]))
        for *key, ev in meta.select("name", "pid", "tid", "arg_name", pl.col("_ev") + base).iter_rows():
            if len(self.threads) >= MAX_THREADS:
                break
            self.threads.setdefault(tuple(key), ev)
        if self.pending_rows >= PENDING_ROWS:
            self._build_pending()

    def _build_pending(self) -> None:
        """Build the pending native frames, many windows at once (polars' cost per call
        dominates small frames)."""
        for i, name in enumerate(TABLE_NAMES):
            if self.pending[name]:
                df = pl.concat(self.pending[name], rechunk=False)
                self._append(name, _prepare(_native_built(name, df), name, self.dropped))
        self.pending = {t: [] for t in TABLE_NAMES}
        self.pending_rows = 0

    def thread_names(self) -> list[tuple[Any, ...]]:
        """(kind, pid, tid, name) of the process/thread name events, in file order."""
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
        """Distinct ids of the CPU→GPU launch flows (each is a launch correlation id)."""
        return pl.concat([pl.Series("id", [], dtype=pl.Int64()), *self.flow_ids]).unique()

    def finish(self, base_ns: int, trace_id: str) -> dict[str, pl.DataFrame]:
        """Every table at once (see :meth:`finish_each`)."""
        return dict(self.finish_each(base_ns, trace_id))

    def finish_each(self, base_ns: int, trace_id: str) -> Iterator[tuple[str, pl.DataFrame]]:
        """Table by table: concatenate its batches (read back when spilled), drop duplicates,
        add the time base, nest. Only one table's batches are held at a time."""
        self._build_pending()
        for name in TABLE_NAMES:
            parts = self.frames[name] or [pl.read_ipc(f) for f in self.spilled[name]]
            self.frames[name] = []
            for f in self.spilled[name]:
                f.unlink()
            self.spilled[name] = []
            if not parts:
                yield name, schema.empty(name).with_columns(pl.lit(trace_id, dtype=pl.String()).alias("trace_id"))
                continue
            df = pl.concat(parts, how="vertical_relaxed", rechunk=False)
            del parts
            if not df["_ev"].is_sorted():  # events the native scanner left to Python came later
                df = df.sort("_ev")
            # regions keep it: `tracekit label` patches each region's own event by this index
            df = df.rename({"_ev": "event_index"}) if name == "regions" else df.drop("_ev")
            df = finish_table(df, name, base_ns, self.dropped)
            yield name, schema.conform(df, name, trace_id)
            del df


def _get(objs: list[Any], attr: str) -> list[Any]:
    """``[o.attr for o in objs]`` without a Python-level loop."""
    return list(map(attrgetter(attr), objs))


def _common(evs: list[Any], notes: Counter[str], what: str) -> dict[str, pl.Series]:
    return {
        "name": kc.strings(_get(evs, "name"), f"{what} name", notes),
        "pid": kc.ints(_get(evs, "pid"), f"{what} pid", notes),
        "tid": kc.ints(_get(evs, "tid"), f"{what} tid", notes),
        "_ts_ns": kc.ns_from_raw(_get(evs, "ts")),
        "_dur_ns": kc.ns_from_raw(_get(evs, "dur")),
    }


def _built(table: str, evs: list[Any], cats: pl.Series, notes: Counter[str]) -> pl.DataFrame:
    """A table's frame from decoded msgspec events (columns of ``TABLE_SPECS``)."""
    what = WHAT[table]
    cols = _common(evs, notes, what)
    args = _get(evs, "args")
    for col, kind, attr in TABLE_SPECS[table]:
        if kind == "cat":
            cols[col] = cats
        elif kind == "int":
            cols[col] = kc.ints(_get(args, attr), f"{what} {col.lstrip('_')}", notes)
        elif kind == "raw":
            cols[col] = kc.raw_text(_get(args, attr))
        else:
            cols[col] = kc.str_lists(_get(args, attr))
    return pl.DataFrame(cols)


def _native_built(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """The same frame from the native scanner's columns (``NATIVE_COLUMNS``), ``_ev`` last."""
    cols = {"name": df["name"], "pid": df["pid"], "tid": df["tid"], "_ts_ns": df["ts_ns"], "_dur_ns": df["dur_ns"]}
    for col, kind, _ in TABLE_SPECS[table]:
        field = df[col.lstrip("_")]
        cols[col] = kc.str_lists_text(field) if kind == "strlist" else field
    cols["_ev"] = df["_ev"]
    return pl.DataFrame(cols)


def _valid(df: pl.DataFrame, dropped: Counter[str], what: str) -> pl.DataFrame:
    """Drop (and count) events without a usable ts/dur, with dur < 0, or with a ts or dur of
    ±2^62 ns or more (``TIME_LIMIT_NS``: then ``ts + dur`` and every later sum of a few times
    fit int64, never wrap); times relative to the time base (added in ``finish_table``, as
    ``baseTimeNanoseconds`` may follow ``traceEvents``)."""
    ts, dur = pl.col("_ts_ns"), pl.col("_dur_ns")
    bad_ts = ts.is_null()
    bad_dur = dur.is_null() & ~bad_ts
    neg = (dur < 0) & ~bad_ts
    far = ((ts >= TIME_LIMIT_NS) | (ts <= -TIME_LIMIT_NS) | (dur >= TIME_LIMIT_NS)).fill_null(False)  # no abs(): -2^63
    counts = df.select(
        bad_ts.sum().alias("ts"), bad_dur.sum().alias("dur"), neg.sum().alias("neg"), far.sum().alias("far")
    ).row(0)
    reasons = (
        "missing or non-numeric ts",
        "missing or non-numeric dur",
        "negative duration",
        "ts or dur beyond ±2^62 ns",
    )
    for reason, n in zip(reasons, counts):
        if n:
            dropped[f"{what}: {reason}"] += int(n)
    if any(counts):
        df = df.filter(~bad_ts & ~bad_dur & (dur >= 0) & ~far)
    return df.with_columns(ts.alias("start_ns"), (ts + dur).alias("end_ns")).drop("_ts_ns", "_dur_ns")


def _prepare(df: pl.DataFrame, table: str, dropped: Counter[str]) -> pl.DataFrame:
    """Per batch: validity, derived columns, a hash of the duplicate key, and names as
    Categorical (repeated names are then stored once; see ``_shared_strings``)."""
    df = _valid(df, dropped, WHAT[table])
    if table == "kernels":
        df = (
            df.with_columns(
                pl.col("_cat").replace_strict(KERNEL_CATS, return_dtype=pl.String()).alias("kind"),
                # device/stream args are authoritative; pid/tid are their display copies.
                pl.coalesce("device", "pid").alias("device"),
                pl.coalesce("stream", "tid").alias("stream"),
                *[
                    kc.dim(pl.col(f"_{d}"), i).alias(f"{d}_{ax}")
                    for d in ("grid", "block")
                    for i, ax in enumerate("xyz")
                ],
            )
            .with_columns(
                pl.when(pl.col("kind") == schema.KIND_MEMCPY)
                .then(pl.col("name").str.extract(r"Memcpy (\w+)"))
                .alias("copy_kind")
            )
            .drop("_cat", "_grid", "_block")
        )
    elif table == "launches":
        df = df.with_columns(pl.col("_cat").replace_strict(LAUNCH_CATS, return_dtype=pl.String()).alias("api")).drop(
            "_cat"
        )
    elif table == "ops":
        df = df.with_columns(
            kc.json_text_or_null(pl.col("input_dims")).alias("input_dims"),
            kc.json_text_or_null(pl.col("input_strides")).alias("input_strides"),
        )
    else:
        kind = pl.col("_cat").replace_strict(REGION_CATS, return_dtype=pl.String())
        gpu = kind == schema.REGION_GPU_USER
        # gpu_user_annotation: pid/tid are device/stream (some traces lack the stream arg).
        df = df.with_columns(
            kind.alias("kind"),
            pl.when(gpu).then(pl.coalesce("_device", "pid")).otherwise(pl.col("pid")).alias("pid"),
            pl.when(gpu).then(pl.coalesce("_stream", "tid")).otherwise(pl.col("tid")).alias("tid"),
        ).drop("_cat", "_device", "_stream")
    # Hash after the Categorical cast: codes are global in the process, cheaper than the text.
    df = df.with_columns(pl.col("name").cast(pl.Categorical()))
    return df.with_columns(pl.struct(DEDUPE_KEYS[table]).hash(seed=7).alias("_key"))


def decode_fallback(piece: bytes, decoder: msgspec.json.Decoder[Any], dropped: Counter[str]) -> list[Any]:
    """Per-event decode of a batch that failed typed validation or was nested too deeply for
    msgspec; bad events are counted (only once the whole batch went through: a DecodeError,
    e.g. invalid UTF-8, is retried upstream) and stay in the list as None, so that every event
    keeps its index in the file."""
    out: list[Any] = []
    bad: Counter[str] = Counter()
    split = False
    try:
        raws: list[Any] = msgspec.json.decode(piece, type=list[msgspec.Raw])
    except RecursionError:  # split without recursion; only the too-deep elements are lost
        raws, split = elements.split(piece), True
    for raw in raws:
        try:
            out.append(decoder.decode(raw))
        except msgspec.ValidationError as exc:
            msg, _, where = str(exc).partition(" - at ")
            bad[f"invalid event: {msg}" + (f" at {where}" if where else "")] += 1
            out.append(None)
        except RecursionError:
            bad["invalid event: nested too deeply to decode"] += 1
            out.append(None)
        except msgspec.DecodeError:
            if not split:
                raise
            # Bad JSON in a split batch: no byte offset (it would be the element's, not the
            # batch's), so the reader just backs off to an earlier boundary.
            raise msgspec.DecodeError("JSON is malformed") from None
    dropped.update(bad)
    return out
