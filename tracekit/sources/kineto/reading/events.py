"""The typed msgspec structs Kineto events decode into, and the batch decoder (no polars). Only
the fields tracekit
reads are declared; every other key is skipped by the decoder. Timestamps stay raw JSON text
(``msgspec.Raw``), converted to int64 ns exactly later (docs/kineto.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from tracekit.sources.kineto.reading import elements

NULL_RAW = msgspec.Raw(b"null")  # the default of every Raw field (absent = JSON null)


class Args(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` fields tracekit reads; every other key is skipped by the decoder."""

    external_id: Any = msgspec.field(default=None, name="External id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    grid: msgspec.Raw = NULL_RAW  # [x, y, z] kept as text, split in polars
    block: msgspec.Raw = NULL_RAW
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    nbytes: Any = msgspec.field(default=None, name="bytes")
    graph_id: Any = msgspec.field(default=None, name="graph id")
    graph_node_id: Any = msgspec.field(default=None, name="graph node id")
    seq: Any = msgspec.field(default=None, name="Sequence number")
    comm_nelems: Any = msgspec.field(default=None, name="In msg nelems")  # a collective's input message
    comm_dtype: msgspec.Raw = msgspec.field(default=NULL_RAW, name="dtype")  # and its element type
    input_dims: msgspec.Raw = msgspec.field(default=NULL_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=NULL_RAW, name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=NULL_RAW, name="Input Strides")
    concrete: msgspec.Raw = msgspec.field(default=NULL_RAW, name="Concrete Inputs")
    name: Any = None  # M events: process_name / thread_name
    # [memory] instant events (profile_memory=True)
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    addr: Any = msgspec.field(default=None, name="Addr")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


_NO_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = NULL_RAW
    dur: msgspec.Raw = NULL_RAW
    id: Any = None
    args: Args = _NO_ARGS


BATCH = msgspec.json.Decoder(list[Event])
ONE = msgspec.json.Decoder(Event)


def decode_events(piece: bytes, dropped: Counter[str]) -> list[Any]:
    """The events of ``piece`` (a JSON array) as :class:`Event` structs; when typed validation
    fails, event by event (:func:`decode_fallback`, bad events counted in ``dropped``)."""
    try:
        evs: list[Any] = BATCH.decode(piece)
        return evs
    except (msgspec.ValidationError, RecursionError):
        return decode_fallback(piece, ONE, dropped)


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
