"""The JSON rows of an :class:`~tracekit.analysis.result.AnalysisResult`: its frames as records
msgspec encodes (Struct rows, by scope, a chunk of region rows at a time), and the cleaning of
non-finite floats. Split from tracekit/analysis/result.py, which builds the document from them."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import polars as pl

TOP_JSON = 5  # top kernels / ops per region in the JSON (the frames keep 10)


def latency_key(row: dict[str, Any]) -> str:
    """``ttft`` for the trace's own numbers, ``ttft_sidecar`` for the runner's wall clock."""
    return str(row["metric"]) if row.get("source") == "trace" else f"{row['metric']}_{row.get('source')}"


def strip_keys(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def records(df: pl.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    cols = [c for c in columns if c in df.columns]
    return _dicts(df.select(cols))


def _dicts(df: pl.DataFrame) -> list[dict[str, Any]]:
    """``df.to_dicts()``, built from one Python list per column (the same values; ~30 % faster
    than polars' row tuples on the 69-column region rows of a 40k-region document)."""
    names = df.columns
    return [dict(zip(names, row)) for row in zip(*(s.to_list() for s in df.iter_columns()))]


def _rows(df: pl.DataFrame, extra: dict[str, list[Any]] | None = None, skip: tuple[str, ...] = ()) -> list[Any]:
    """The rows of ``df`` but its ``skip`` columns (then the ``extra`` columns, given as lists) as records that msgspec
    encodes exactly as the dicts of :func:`_dicts` (same keys, same order, same values): instances
    of a Struct made for these columns (fields ``f0, f1, ...`` renamed to the column names, so any
    name works), built positionally and not tracked by the garbage collector — 3× faster to build
    and free than 2.8 M dict entries of a 40k-region document. Read-only: nothing adds keys."""
    cols = {**{c: s.to_list() for c, s in zip(df.columns, df.iter_columns()) if c not in skip}, **(extra or {})}
    names = list(cols)
    fields = [f"f{i}" for i in range(len(names))]
    row = msgspec.defstruct("Row", fields, rename=dict(zip(fields, names)), gc=False)
    return list(map(row, *cols.values())) if names else [row() for _ in range(df.height)]


# region rows turned into Python objects and encoded at a time (encoded_rows, row_chunks)
ROW_CHUNK = 1024


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (documents are trees of new containers, no cycles)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def extra_lists(reg: pl.DataFrame, frames: dict[str, pl.DataFrame]) -> dict[str, list[Any]]:
    """Per row of ``reg``, the records of each frame of ``frames`` whose ``scope`` is its region id
    (in the frame's order; ``[]`` for none)."""
    ids = reg["region_id"].to_list() if "region_id" in reg.columns else [None] * reg.height
    keys = [str(i) for i in ids]
    out = {}
    for name, df in frames.items():
        by = _by_scope(df, "region")
        out[name] = [by.get(k, []) for k in keys]
    return out


def row_chunks(df: pl.DataFrame, extra: dict[str, pl.DataFrame], chunk: int | None = None) -> Iterator[bytes]:
    """The region rows of ``df`` with their ``extra`` records (:meth:`AnalysisResult._region_frames`)
    as compact JSON arrays of ``chunk`` (default :data:`ROW_CHUNK`) rows, each made when it is
    read (none for no rows): the extra records are turned into Python objects for one chunk of
    regions at a time too (the 860 MB replica's top kernels, ops and culprits of 40.7 k regions:
    ~75 MB of Python objects at once)."""
    chunk = chunk or ROW_CHUNK
    enc = msgspec.json.Encoder(enc_hook=plain)
    ids = df["region_id"].cast(pl.String()) if "region_id" in df.columns else None
    ends = list(range(chunk, df.height + chunk, chunk))
    placed = None
    if ids is not None and ids.null_count() == 0 and ids.n_unique() == ids.len():
        # each frame's rows put once in the order of their region's row (stable: a region's rows
        # keep theirs), so a chunk's rows are one slice, found by a binary search per chunk end
        where = pl.DataFrame({"scope": ids, "_pos": pl.int_range(ids.len(), dtype=pl.Int64(), eager=True)})
        placed = {}
        for k, f in extra.items():
            g = f.join(where, on="scope", how="inner", maintain_order="left").sort("_pos", maintain_order=True)
            cut = g["_pos"].search_sorted(pl.Series(ends, dtype=pl.Int64()), side="left").to_list()
            placed[k] = (g.drop("_pos"), [0, *cut])
    for n, i in enumerate(range(0, df.height, chunk)):
        rows = df.slice(i, chunk)
        if placed is not None:
            mine = {k: g.slice(at[n], at[n + 1] - at[n]) for k, (g, at) in placed.items()}
        elif ids is None:
            mine = {k: f.head(0) for k, f in extra.items()}
        else:
            keys = ids.slice(i, chunk).implode()
            mine = {k: f.filter(pl.col("scope").is_in(keys)) for k, f in extra.items()}
        with gc_paused():
            part = _rows(rows, extra_lists(rows, mine))
            out = enc.encode(part)
            del part
        yield out


def encoded_rows(df: pl.DataFrame, extra: dict[str, list[Any]], chunk: int = ROW_CHUNK) -> msgspec.Raw:
    """The JSON array of :func:`_rows` ``(df, extra)``, encoded ``chunk`` rows at a time into one
    buffer: the same bytes as encoding the whole list (compact JSON: ``[`` rows joined by ``,``
    ``]``), without holding a Python object per value of every row at once (the 860 MB replica's
    40.7 k regions × 72 fields: ~100 MB of Python objects beside the encoded document)."""
    enc = msgspec.json.Encoder(enc_hook=plain)
    buf = bytearray()
    for i in range(0, df.height, chunk):
        part = _rows(df.slice(i, chunk), {k: v[i : i + chunk] for k, v in extra.items()})
        if buf:
            del buf[-1]  # the "]" of the rows so far: this part's "[" becomes ","
        at = len(buf)
        enc.encode_into(part, buf, at)
        if at:
            buf[at] = ord(",")
        del part
    return msgspec.Raw(memoryview(buf) if buf else b"[]")


def _by_scope(df: pl.DataFrame, kind: str) -> dict[str, list[Any]]:
    """The rows of the scopes of ``kind`` as records, by scope (one polars query)."""
    if df.height == 0 or "scope_kind" not in df.columns:
        return {}
    return _scope_records(df.filter(pl.col("scope_kind") == kind))


def scopes_by_kind(wanted: list[tuple[pl.DataFrame, str]]) -> list[dict[str, list[Any]]]:
    """:func:`_by_scope` of several (frame, kind) at once: the filters in one polars query."""
    idx = [i for i, (df, _) in enumerate(wanted) if df.height and "scope_kind" in df.columns]
    got = pl.collect_all(
        [wanted[i][0].lazy().filter(pl.col("scope_kind") == wanted[i][1]) for i in idx], engine="in-memory"
    )
    out: list[dict[str, list[Any]]] = [{} for _ in wanted]
    for i, d in zip(idx, got):
        out[i] = _scope_records(d)
    return out


def _scope_records(d: pl.DataFrame) -> dict[str, list[Any]]:
    """The rows of ``d`` (one kind of scope) as records, by scope."""
    out: dict[str, list[Any]] = {}
    # One conversion for the whole frame: a frame per scope costs ~0.5 ms each, and a trace
    # can have thousands of regions.
    records = _rows(d, skip=("scope_kind", "scope"))
    for scope, record in zip(d["scope"].to_list(), records):
        out.setdefault(str(scope), []).append(record)
    return out


def clean(x: Any) -> Any:
    """NaN / inf → null, recursively, so the document is strict JSON (keys become strings,
    tuples lists). One msgspec round trip (C; it writes non-finite floats as null): 0.3 s where a
    recursive Python walk took 1–3 s on a 40k-region document."""
    return msgspec.json.decode(msgspec.json.encode(x, enc_hook=plain))


def plain(o: Any) -> Any:
    """A value msgspec cannot encode (a Path, ...): its ISO form or its text."""
    return o.isoformat() if hasattr(o, "isoformat") else str(o)
