"""Native Kineto scanner (tracekit.sources.kineto._kscan) called directly: its status / end /
element / (ph, cat) answers, its ts → ns rounding, where it stops and what it leaves to Python,
and the two-halves split. Shared helpers: kineto_both.py. Expected values derived by hand."""

from __future__ import annotations

import pytest

_kscan = pytest.importorskip("tracekit.sources.kineto._kscan")

from kineto_both import K  # noqa: E402
from tracekit.sources.kineto.reading import native as kn  # noqa: E402
from tracekit.sources.kineto.routes import FLOW_CATS, NATIVE_COLUMNS, X_ROUTES  # noqa: E402

# --- the scanner itself ------------------------------------------------------------------------

A = K(1).encode()  # a kernel: routed to group 0
FLOW = b'{"ph":"s","cat":"ac2g","id":3,"pid":0,"tid":7,"ts":1}'
INSTANT = b'{"ph":"i","cat":"x","name":"m","s":"t"}'


def scan(buf: bytes, pos: int = 0) -> kn.Window:
    return kn.scan(buf, pos, X_ROUTES, sorted(FLOW_CATS), NATIVE_COLUMNS)


def test_scan_need_more_at_the_last_complete_event() -> None:
    done = A + b", " + FLOW + b"," + INSTANT
    w = scan(done + b" ," + A[:10])  # the buffer ends inside the 4th element
    assert (w.status, w.end, w.elements) == (kn.NEED_MORE, len(done), 3)
    assert w.pairs == [("s", "ac2g", 1), ("i", "x", 1)]  # flow and instant counted by (ph, cat)
    assert [g.height for g in w.groups] == [1, 0, 0, 0, 1, 0, 0]  # kernel: group 0; flow: group 4 (and counted)
    assert w.groups[4].row(0) == ("ac2g", "s", 3)
    assert w.groups[0].select("ts_ns", "dur_ns", "correlation", "_ev").row(0) == (110_000, 5000, 1, 0)
    assert (scan(A + b',{"ts":12').end, scan(b"  ").end, scan(b"  ").elements) == (len(A), 0, 0)
    assert scan(b"  " + A + b",", 2).end == len(A) + 2  # `pos` honoured
    # An event counts only once a separator follows it (as on the Python path): at the end of
    # the buffer it is read again with what follows; followed by garbage it is damage.
    assert (scan(A).status, scan(A).end, scan(A).elements) == (kn.NEED_MORE, 0, 0)
    assert (scan(A + b' "x"').status, scan(A + b' "x"').end) == (kn.STOPPED, 0)


def test_scan_closed_just_after_the_bracket() -> None:
    head = A + b",\n" + FLOW + b"\n]"
    routes = tuple((c.encode(), g) for c, g in X_ROUTES.items())
    status, end, groups, pairs, slow = _kscan.scan(head + b'  , "x": 1}', 0, routes, (b"ac2g",))
    assert (status, end, len(groups), pairs, slow) == (kn.CLOSED, len(head), 7, [("s", "ac2g", 1)], b"")
    assert groups[0][0] == 1 and groups[4][0] == 1  # (rows, strings, ints) per group
    assert scan(head).elements == 2


@pytest.mark.parametrize(
    "ts, ns",
    [
        ("1.2345", 1234),
        ("1.2346", 1235),
        ("0.0025", 2),
        ("-0.0035", -4),
        ("1.00051", 1001),  # sticky digit → up
        ("7", 7000),
        ("-0", 0),
        ("1712195495519689.047", 1712195495519689047),
        ("9223372036854775.807", 2**63 - 1),
        ("-9223372036854775.808", -(2**63)),
        ("9223372036854775.8075", None),
        ("1e3", None),
        ('"1"', None),
    ],
)
def test_scan_ts_to_ns(ts: str, ns: int | None) -> None:
    w = scan(K(0, ts=ts).encode() + b"]")  # None: left to Python (beyond int64, exponent, a string)
    assert w.groups[0]["ts_ns"].to_list() == ([] if ns is None else [ns]) and len(w.slow) == (ns is None)


@pytest.mark.parametrize(
    "bad",
    [b'{"ph":"X" "cat":1}', b"5", b'"x"', b'{"name":"\xff"}', b'{"a":01}', b'{"name":"a\tb"}'],
    ids=["missing-comma", "number", "string", "bad-utf8", "leading-zero", "raw-tab"],
)
def test_scan_stops_before_what_python_must_handle(bad: bytes) -> None:
    w = scan(A + b", " + bad + b", " + A)
    # `end` is just after the last complete element (the header comment says "the start of that
    # element"; the ", " between them is left to the caller, which skips separators).
    assert (w.status, w.end, w.elements) == (kn.STOPPED, len(A), 1)
    assert scan(A + b", " + bad, len(A) + 2).end == len(A) + 2  # stopped right at the element: no progress


def test_scan_slow_spans_and_their_indices() -> None:
    odd = b'{"ph":"X","cat":"kernel","pid":"Spans","ts":1,"dur":1}'
    buf = A + b", " + odd + b", " + A + b"]"
    w = scan(buf)
    s = len(A) + 2
    assert w.slow == [(s, s + len(odd), 1)] and w.elements == 3 and w.status == kn.CLOSED
    assert w.groups[0]["_ev"].to_list() == [0, 2]


def test_scan_split_keeps_only_a_proven_cut() -> None:
    small = [K(i).encode() for i in range(12_000)]
    buf = b",\n".join(small) + b"\n]"
    assert len(buf) >= 1 << 20
    first, second = kn.scan_split(buf, 0, X_ROUTES, sorted(FLOW_CATS), NATIVE_COLUMNS)
    assert first.status == kn.NEED_MORE and second.status == kn.CLOSED and second.end == len(buf)
    assert first.elements + second.elements == 12_000
    # A "}, {" inside a 1.2 MB name is the first candidate after the middle: the first half ends
    # before that event, not at the cut, so the second half is dropped.
    big = K(5, name="a" * 700_000 + "}, {" + "b" * 500_000).encode()
    ws = kn.scan_split(A + b",\n" + big + b",\n" + A + b"]", 0, X_ROUTES, sorted(FLOW_CATS), NATIVE_COLUMNS)
    assert [(w.status, w.end, w.elements) for w in ws] == [(kn.NEED_MORE, len(A), 1)]
