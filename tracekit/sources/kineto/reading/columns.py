"""Raw decoded values → typed polars columns, counting every value that had to be coerced.

The fast path hands a whole Python list to polars in one call; only when that fails (a string
pid, a float id, an integer beyond int64) does a per-value pass run, which counts each reason.
"""

from __future__ import annotations

from collections import Counter
from contextlib import suppress
from typing import Any

import msgspec
import polars as pl

from tracekit.sources.kineto.reading.events import NULL_RAW

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_RS = b"\x1e"  # never appears unescaped in JSON text, so it cannot collide with a raw value


def ints(values: list[Any], field: str, notes: Counter[str]) -> pl.Series:
    """Int64 column; numeric strings and integral floats are converted, other values become null.
    Every converted or nulled value is counted in ``notes`` as ``"<field>: <reason>"``."""
    if bool not in set(map(type, values)):  # polars would take booleans silently
        with suppress(TypeError, OverflowError, ValueError, pl.exceptions.PolarsError):
            return pl.Series(values, dtype=pl.Int64())
    out: list[int | None] = []
    for v in values:
        r, why = _to_int(v)
        if why:
            notes[f"{field}: {why}"] += 1
        out.append(r)
    return pl.Series(out, dtype=pl.Int64())


def _to_int(v: Any) -> tuple[int | None, str | None]:
    if v is None:
        return None, None
    if isinstance(v, bool):
        return int(v), "boolean converted"
    if isinstance(v, int):
        if _INT64_MIN <= v <= _INT64_MAX:
            return v, None
        return None, "integer beyond int64 (nulled)"
    if isinstance(v, float):
        if v == v and abs(v) < 9.2e18 and v == int(v):
            return int(v), "float converted"
        return None, "non-integral number (nulled)"
    if isinstance(v, str):
        try:
            r = int(v.strip())
        except ValueError:
            return None, "non-numeric string (nulled)"
        if _INT64_MIN <= r <= _INT64_MAX:
            return r, "numeric string converted"
        return None, "integer beyond int64 (nulled)"
    return None, f"{type(v).__name__} value (nulled)"


def strings(values: list[Any], field: str, notes: Counter[str]) -> pl.Series:
    """String column; other JSON types become null and are counted."""
    with suppress(TypeError, ValueError, pl.exceptions.PolarsError):
        return pl.Series(values, dtype=pl.String())
    out: list[str | None] = []
    for v in values:
        if v is None or isinstance(v, str):
            out.append(v)
        else:
            notes[f"{field}: {type(v).__name__} instead of string (nulled)"] += 1
            out.append(None)
    return pl.Series(out, dtype=pl.String())


def str_lists(raws: list[msgspec.Raw]) -> pl.Series:
    """List[String] column from raw JSON lists (``Input type``, ``Concrete Inputs``), parsed in
    polars; items that are not strings (nested lists) are kept as their JSON text."""
    return str_lists_text(raw_text(raws))


def str_lists_text(text: pl.Series) -> pl.Series:
    """:func:`str_lists` on JSON text (null or ``"null"`` for absent values)."""
    if text.null_count() == text.len():
        return pl.repeat(None, text.len(), dtype=pl.List(pl.String()), eager=True)
    with suppress(pl.exceptions.PolarsError):
        return text.str.json_decode(pl.List(pl.String()))
    # Decided row by row, so that a row's value never depends on its batch: rows holding a
    # nested list or object (what polars refuses) go through msgspec, the others through polars.
    nested = text.str.slice(1).str.contains(r"[\[{]").fill_null(False)
    flat = text.filter(~nested)
    try:
        flat_lists = flat.str.json_decode(pl.List(pl.String()))
    except pl.exceptions.PolarsError:
        flat_lists = _lists_by_msgspec(flat)
    frame = pl.DataFrame({"i": pl.int_range(text.len(), eager=True)})
    parts = pl.concat(
        [
            pl.DataFrame({"i": frame["i"].filter(~nested), "v": flat_lists}),
            pl.DataFrame({"i": frame["i"].filter(nested), "v": _lists_by_msgspec(text.filter(nested))}),
        ]
    )
    return parts.sort("i")["v"].alias(text.name)


def _lists_by_msgspec(text: pl.Series) -> pl.Series:
    """JSON lists → List[String]: strings as they are, null items null, other items as JSON text."""
    out: list[list[str | None] | None] = []
    for t in text:
        try:
            items = _RAW_LIST.decode(t) if t is not None else None
        except (msgspec.DecodeError, RecursionError):  # not a list (or not decodable at all)
            items = None
        out.append(None if items is None else [_item_text(x) for x in items])
    return pl.Series(out, dtype=pl.List(pl.String()))


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def _item_text(raw: msgspec.Raw) -> str | None:
    """A list item: a string as itself, null as None, anything else as its JSON text
    (re-encoded compactly; kept verbatim when msgspec cannot hold it, e.g. ``1e400``)."""
    try:
        v = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return bytes(raw).decode("utf-8", "replace").strip()
    if isinstance(v, str) or v is None:
        return v
    return msgspec.json.encode(v).decode()


def raw_text(raws: list[msgspec.Raw]) -> pl.Series:
    """The JSON text of raw values as a String column, in one pass (JSON ``null`` stays the
    text ``"null"``, callers map it — except when every value is null: then a null column)."""
    if not raws:
        return pl.Series([], dtype=pl.String())
    if raws[0] == NULL_RAW and raws.count(NULL_RAW) == len(raws):  # absent from every event (common)
        return pl.repeat(None, len(raws), dtype=pl.String(), eager=True)
    blob = _RS.join(raws).decode("utf-8", "replace")
    return pl.Series([blob]).str.split("\x1e").explode()


_NS_LIMIT = _INT64_MAX // 1000  # the largest |µs| whose ns value fits in int64
_INT_LIST = msgspec.json.Decoder(list[int])


def ns_from_raw(raws: list[msgspec.Raw]) -> pl.Series:
    """JSON µs values → Int64 ns, exactly as :func:`ns_from_text` on their text. Fast path when
    every value is an integer literal (common in older traces): the raw values are re-joined as
    one JSON array and decoded by msgspec as ints, then scaled, with no text column."""
    if raws and bytes(raws[0]).lstrip(b"-").isdigit():  # the first value is an integer literal
        try:
            us = pl.Series(_INT_LIST.decode(msgspec.json.encode(raws)), dtype=pl.Int64())
        except (msgspec.DecodeError, TypeError, OverflowError, ValueError, pl.exceptions.PolarsError):
            pass  # a float, string, null or out-of-range value: go through the text
        else:
            c = pl.col("us")
            return us.to_frame("us").select(pl.when((c >= -_NS_LIMIT) & (c <= _NS_LIMIT)).then(c * 1000)).to_series()
    return raw_text(raws).to_frame("t").select(ns_from_text(pl.col("t"))).to_series()


def own_text(col: pl.Expr) -> pl.Expr:
    """``col``'s text in buffers of its own. A string column taken from the native scanner views
    the one text buffer that all the window's string fields share, so one kept column holds every
    field's text alive (the ops' shapes: ~155 bytes a row instead of ~35); appending "" makes
    polars write each value anew (BENCHMARKS.md, "Memory per event")."""
    return col + pl.lit("")


def json_text_or_null(col: pl.Expr) -> pl.Expr:
    return pl.when(col == "null").then(None).otherwise(col)


def ns_from_text(col: pl.Expr) -> pl.Expr:
    """Decimal µs text → int64 ns, exactly: parsed as a decimal with 3 fraction digits (digits
    below 1 ns are truncated), then scaled by 1000 in integer arithmetic. Quoted numbers are
    accepted; null, other strings and values beyond int64 ns → null."""
    # The physical value of Decimal(scale=3) is the number × 1000 as an integer: exactly ns.
    dec = col.str.strip_chars('"').str.to_decimal(scale=3)
    return dec.to_physical().cast(pl.Int64(), strict=False)


def dims(col: pl.Expr) -> pl.Expr:
    """Every item of a JSON integer list held as text (``"[128, 1, 1]"`` → ``[128, 1, 1]``), each
    null where it is not an integer; null for null text. Item ``i``: ``list.get(i, null_on_oob=True)``.
    The text is split once for all items, faster than one split per item."""
    items = col.str.strip_chars("[] \t\r\n").str.split(",")
    return items.list.eval(pl.element().str.strip_chars().cast(pl.Int64(), strict=False))
