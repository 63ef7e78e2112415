"""Native Kineto scanner (tracekit.sources.kineto._kscan): the same tables and meta as the pure-Python path
(TRACEKIT_PURE_PYTHON=1) on every shared trace and on hand-made edge cases; the scanner's own
status / end / element / (ph, cat) answers checked directly. Expected values derived by hand."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import pytest
from polars.testing import assert_frame_equal

_kscan = pytest.importorskip("tracekit.sources.kineto._kscan")

from conftest import SHARED_TRACES  # noqa: E402
from tracekit.errors import EmptyTraceError, TraceFormatError  # noqa: E402
from tracekit.sources.kineto import native as kn  # noqa: E402
from tracekit.sources.kineto.loader import load_kineto  # noqa: E402
from tracekit.sources.kineto.routes import FLOW_CATS, NATIVE_COLUMNS, X_ROUTES  # noqa: E402
from tracekit.tables.trace import Trace  # noqa: E402

TABLES = ("kernels", "launches", "ops", "regions")
LARGE = ("df_index_resolver", "mtia_trace_single_rank")


def load_both(path: Path, mp: pytest.MonkeyPatch) -> tuple[Trace, Trace, list[list[kn.Window]]]:
    """(pure, native, the native path's scan_split results); the native path must really scan."""
    real, calls = kn.scan_split, []

    def spy(*a: Any) -> list[kn.Window]:
        calls.append(real(*a))
        return calls[-1]

    mp.setattr(kn, "scan_split", spy)
    mp.setenv("TRACEKIT_PURE_PYTHON", "1")
    pure = load_kineto(path, trace_id="t")
    assert not calls
    mp.delenv("TRACEKIT_PURE_PYTHON")
    native = load_kineto(path, trace_id="t")
    assert calls, "the native scanner was not used"
    return pure, native, calls


def assert_same(pure: Trace, native: Trace) -> None:
    for t in TABLES:
        assert_frame_equal(pure.table(t), native.table(t))
    assert pure.meta == native.meta


def write(tmp_path: Path, data: bytes, gz: bool = False, name: str = "t") -> Path:
    p = tmp_path / (name + (".json.gz" if gz else ".json"))
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def doc(events: list[str]) -> bytes:
    return ('{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + "\n]}").encode()


def K(i: int, name: str = "", ts: Any = None, dur: Any = 5) -> str:
    """Kernel i: ts 100 + 10 i µs, correlation i."""
    ts = 100 + 10 * i if ts is None else ts
    return (
        '{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":%s,"dur":%s,'
        '"args":{"device":0,"stream":7,"correlation":%d}}' % (name or f"k{i}", ts, dur, i)
    )


def OP(name: str, ts: Any, dur: Any = 1, extra: str = "") -> str:
    return '{"ph":"X","cat":"cpu_op","name":"%s","pid":1,"tid":1,"ts":%s,"dur":%s%s}' % (name, ts, dur, extra)


gz_param = pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])

# --- 1. every shared Kineto trace ------------------------------------------------------------


def _shared() -> list[Any]:
    files = sorted(p for p in (SHARED_TRACES / "kineto").rglob("*") if p.name.endswith((".json", ".json.gz")))
    return [
        pytest.param(
            p, id=str(p.relative_to(SHARED_TRACES)), marks=[pytest.mark.slow] if any(s in str(p) for s in LARGE) else []
        )
        for p in files
    ]


@pytest.mark.parametrize("path", _shared())
def test_shared_trace_parity(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        pure, native, _ = load_both(path, monkeypatch)  # the pure path loads first
    except (TraceFormatError, EmptyTraceError) as exc:
        pytest.skip(f"the pure path rejects it: {exc}")
    assert_same(pure, native)


# --- 2. hand-made traces ----------------------------------------------------------------------


@gz_param
def test_times_rounded_half_to_even(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    events = [
        K(1, ts="1.2345", dur="0.0025"),
        K(2, ts="1.2346", dur="1.0015"),
        K(3, ts="-0.0035", dur="0.0015"),
        OP("epoch", 1669783687464181, 3),
        OP("frac", "1712195495519689.047", "0.5"),
    ]
    pure, native, _ = load_both(write(tmp_path, doc(events), gz), monkeypatch)
    assert_same(pure, native)
    k = pure.kernels.sort("correlation")
    # 1234.5 ns → 1234 (tie, 4 even); 1234.6 → 1235; -3.5 → -4 (tie, 4 even).
    assert k["start_ns"].to_list() == [1234, 1235, -4]
    # durations: 2.5 → 2, 1001.5 → 1002, 1.5 → 2 ns
    assert (k["end_ns"] - k["start_ns"]).to_list() == [2, 1002, 2]
    # integer epoch µs × 1000 exactly; 19 significant digits kept exactly (no float64).
    assert pure.ops["start_ns"].to_list() == [1669783687464181000, 1712195495519689047]
    assert pure.ops["end_ns"].to_list() == [1669783687464184000, 1712195495519689547]
    assert pure.meta["parse_stats"]["dropped"] == {} and pure.meta["time_base_ns"] == 0


@gz_param
def test_int64_edges_of_ns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    events = [
        OP("max", "9223372036854775.807", 0),
        OP("min", "-9223372036854775.808", 0),
        OP("up", "9223372036854775.8075", 0),
        OP("over", "9223372036854775.808", 0),
        OP("int_over", "9223372036854776", 0),
        OP("u64", "18446744073709551616", 0),
        OP("quoted", '"12.5"', 1),
        OP("lim", "4611686018427387.903", 0),
        OP("lim_over", "-4611686018427387.904", 0),
    ]
    pure, native, _ = load_both(write(tmp_path, doc(events), gz), monkeypatch)
    assert_same(pure, native)
    # .8075 rounds (tie, 7 odd) to ...808 = 2^63: beyond int64, like .808 itself, 9223372036854776 µs
    # and 2^64 µs → 4 events dropped; "12.5" as a string is accepted: 12500 ns. max (2^63 - 1 ns)
    # and min (-2^63 ns) parse exactly but lie beyond the ±2^62 ns every time must stay within
    # (docs/robustness.md), as does -2^62 ns: 3 more dropped; 2^62 - 1 ns is kept.
    assert pure.ops["name"].to_list() == ["quoted", "lim"]
    assert pure.ops["start_ns"].to_list() == [12500, 2**62 - 1]
    assert pure.meta["parse_stats"]["dropped"] == {
        "cpu op: missing or non-numeric ts": 4,
        "cpu op: ts or dur beyond ±2^62 ns": 3,
    }


@gz_param
def test_unusual_values_go_to_python_and_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    events = [
        '{"ph":"X","cat":"kernel","name":"spans","pid":"Spans","tid":7,"ts":1,"dur":1,"args":{"correlation":1}}',
        '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":"12","ts":1,"dur":1,'
        '"args":{"correlation":2.0}}',
        OP('say \\"hi\\" caf\\u00e9', 1),
        OP("naïve ✓", 2),
        '{"ph":"X","cat":"cpu_op","n\\u0061me":"esc-key","pid":1,"tid":1,"ts":3,"dur":1}',
        OP("null-args", 4, extra=',"args":null'),
        OP("exp", "1e3"),
        OP("big", 5, extra=',"args":{"External id":99999999999999999999}'),
        '{"ph":"s","cat":"ac2g","id":2.0,"pid":1,"tid":1,"ts":1,"name":"ac2g"}',
        '{"ph":"f","cat":"ac2g","id":2,"pid":0,"tid":7,"ts":1,"name":"ac2g","bp":"e"}',
        '{"ph":"X","cat":"ker\\u006eel","name":"esc-cat","pid":0,"tid":7,"ts":9,"dur":1,"args":{"correlation":3}}',
    ]
    pure, native, calls = load_both(write(tmp_path, doc(events), gz), monkeypatch)
    assert_same(pure, native)
    # Every event but the valid non-ASCII name (3) and the plain flow end (9) goes to Python.
    assert [k for ws in calls for w in ws for _, _, k in w.slow] == [0, 1, 2, 4, 5, 6, 7, 8, 10]
    assert pure.ops["name"].to_list() == ['say "hi" café', "naïve ✓", "esc-key", "exp", "big"]
    assert pure.ops["start_ns"].to_list() == [1000, 2000, 3000, 1_000_000, 5000]  # 1e3 µs = 10^6 ns
    assert pure.kernels["name"].to_list() == ["spans", "esc-cat"]  # the escaped cat is "kernel"
    ps = pure.meta["parse_stats"]
    # 11 read = 8 kept (2 kernels, 1 launch, 5 ops) + 2 flows skipped + the null-args op dropped.
    assert (ps["events_read"], ps["events_kept"]) == (11, 8)
    assert ps["skipped"] == {"ac2g [f]": 1, "ac2g [s]": 1}
    assert ps["dropped"] == {"invalid event: Expected `object`, got `null` at `$.args`": 1}
    assert ps["coerced"] == {
        "cpu op external_id: integer beyond int64 (nulled)": 1,
        "device activity pid: non-numeric string (nulled)": 1,
        "flow id: float converted": 1,
        "runtime call correlation: float converted": 1,
        "runtime call tid: numeric string converted": 1,
    }
    assert pure.launches.select("tid", "correlation").row(0) == (12, 2)


@gz_param
def test_invalid_utf8_replaced_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    data = doc([K(0), K(1, name="kFF1"), K(2), K(3, name="E282")])
    data = data.replace(b"kFF1", b"k\xff1").replace(b"E282", b"\xe2\x82")
    pure, native, _ = load_both(write(tmp_path, data, gz), monkeypatch)
    assert_same(pure, native)
    # \xff is one bad sequence; \xe2\x82 a cut 3-byte sequence, also one → 2 replacements.
    assert pure.kernels["name"].to_list() == ["k0", "k\ufffd1", "k2", "\ufffd"]
    assert pure.meta["parse_stats"]["utf8_replaced"] == 2


def test_cut_off_json_and_gzip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = doc([K(i) for i in range(6)])
    cut = text.index(K(4).encode()) + 30  # 30 bytes into the 5th event
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # a gzip stream whose compressed bytes stop at `cut`
    gz_cut = tmp_path / "cut2.json.gz"
    gz_cut.write_bytes(c.compress(text[:cut]) + c.flush(zlib.Z_SYNC_FLUSH))
    for path, gz_trunc in (
        (write(tmp_path, text[:cut]), False),
        (write(tmp_path, text[:cut], True), False),
        (gz_cut, True),
    ):
        pure, native, _ = load_both(path, monkeypatch)
        assert_same(pure, native)
        ps = pure.meta["parse_stats"]
        # Events 0..3 complete; the 30 bytes of the 5th are lost.
        assert pure.kernels["correlation"].to_list() == [0, 1, 2, 3]
        assert (ps["truncated"], ps["bytes_lost"]) == (True, 30)
        assert any("gzip stream is truncated" in w for w in pure.meta["warnings"]) == gz_trunc


@gz_param
def test_malformed_json_in_the_middle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    bad = K(2).replace('"stream":7,', '"stream":7 ')  # a missing comma inside args
    text = doc([K(0), K(1), bad, K(3)])
    pure, native, _ = load_both(write(tmp_path, text, gz), monkeypatch)
    assert_same(pure, native)
    at = text.index(b'"stream":7 "correlation"') + len(b'"stream":7 ')  # where the comma should be
    assert pure.kernels["correlation"].to_list() == [0, 1]
    assert pure.meta["warnings"] == [f"malformed JSON at byte {at}; the rest of the file was not read"]


@gz_param
def test_non_object_elements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    cases = (([K(0), "5", K(1), '"x"', K(2)], {"int": 1, "str": 1}), ([K(0), K(1), "[1, 2]"], {"array": 1}))
    for events, dropped in cases:
        pure, native, _ = load_both(write(tmp_path, doc(events), gz), monkeypatch)
        assert_same(pure, native)
        ps = pure.meta["parse_stats"]
        assert ps["events_read"] == len(events) and ps["events_kept"] == len(events) - sum(dropped.values())
        assert ps["dropped"] == {f"invalid event: Expected `object`, got `{t}`": n for t, n in dropped.items()}


@gz_param
def test_bare_array_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    text = ("[" + ",\n".join([K(0), K(1), '{"ph":"i","cat":"x","name":"m","ts":1,"s":"t"}']) + "]").encode()
    pure, native, _ = load_both(write(tmp_path, text, gz), monkeypatch)
    assert_same(pure, native)
    assert pure.kernels.height == 2 and pure.meta["parse_stats"]["skipped"] == {"x [i]": 1}


def test_repeated_args_object_replaces_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = '{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"correlation":9},"args":{"device":3}}'
    pure, native, _ = load_both(write(tmp_path, doc([ev])), monkeypatch)
    assert_same(pure, native)
    # msgspec keeps only the last "args": correlation absent, device 3 (fixed in e3a0666).
    assert pure.kernels.select("correlation", "device").row(0) == (None, 3)


def synthetic(n: int) -> list[str]:
    """n × (cpu_op, runtime, flow s, flow f, kernel); op ts decrease so file order ≠ time order."""
    out = []
    for i in range(n):
        ts = 10 * n - 10 * i
        out += [
            OP(
                f"aten::op{i % 7}",
                f"{ts}.{i % 1000:03d}",
                4,
                ',"args":{"External id":%d,"Sequence number":%d,'
                '"Input Dims":[[%d,3]],"Input type":["float","int"],"Concrete Inputs":["",""]}' % (i, i, i),
            ),
            '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":%d.5,"dur":2,'
            '"args":{"External id":%d,"correlation":%d}}' % (ts + 1, i, i),
            '{"ph":"s","cat":"ac2g","id":%d,"pid":1,"tid":2,"ts":%d,"name":"ac2g"}' % (i, ts + 1),
            '{"ph":"f","cat":"ac2g","id":%d,"pid":0,"tid":7,"ts":%d,"name":"ac2g","bp":"e"}' % (i, ts + 5),
            K(i, f"kern{i % 5}", ts + 5, 3).replace('"correlation"', '"grid":[%d,1,1],"correlation"' % (i % 9 + 1)),
        ]
    return out


@gz_param
def test_many_windows_and_split_halves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    n = 14_000
    events = synthetic(n)
    # Python-path events in several windows and halves: 3 ops with a numeric-string tid, an escaped name.
    for j in (5 * 200, 5 * 7000, 5 * 13000):
        events[j] = events[j].replace('"tid":1,', '"tid":"1",')
    events[5 * 9000 + 4] = events[5 * 9000 + 4].replace('"kern0"', '"kern\\u0030"')
    text = doc(events)
    assert len(text) > 9_000_000
    pure, native, calls = load_both(write(tmp_path, text, gz), monkeypatch)
    assert_same(pure, native)
    assert len(calls) >= 2 and any(len(ws) == 2 for ws in calls)  # several windows, some scanned as two halves
    assert sum(w.elements for ws in calls for w in ws) == 5 * n
    assert (pure.kernels.height, pure.launches.height, pure.ops.height) == (n, n, n)
    assert pure.ops["external_id"].to_list() == list(range(n))  # file order, though ts decrease
    assert pure.kernels.row(9000, named=True)["name"] == "kern0" and pure.kernels["grid_x"][10] == 2
    ps = pure.meta["parse_stats"]
    assert ps["skipped"] == {"ac2g [f]": n, "ac2g [s]": n}
    assert ps["coerced"] == {"cpu op tid: numeric string converted": 3}
    assert pure.meta["flows"]["device_activities_with_flow"] == n


def test_more_pairs_than_the_scanner_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 600 instant events over 300 categories: the scanner counts 256 (ph, cat) pairs, the other
    # 44 categories × 2 events = 88 go to Python; both paths count 300 skipped keys, 600 events.
    events = ['{"ph":"i","cat":"c%d","name":"x","pid":1,"tid":1,"ts":%d,"s":"t"}' % (i % 300, i) for i in range(600)]
    text = doc(events + [K(0)])
    w = kn.scan(text, text.index(b"[") + 1, X_ROUTES, sorted(FLOW_CATS), NATIVE_COLUMNS)
    assert (w.status, w.elements, len(w.pairs), len(w.slow)) == (kn.CLOSED, 601, 256, 88)
    assert w.groups[0]["_ev"].to_list() == [600]
    pure, native, _ = load_both(write(tmp_path, text), monkeypatch)
    assert_same(pure, native)
    skipped = pure.meta["parse_stats"]["skipped"]
    assert len(skipped) == 300 and set(skipped.values()) == {2}


# --- 3. the scanner itself ----------------------------------------------------------------------

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
    assert [g.height for g in w.groups] == [1, 0, 0, 0, 1, 0]  # kernel: group 0; flow: group 4 (and counted)
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
    assert (status, end, len(groups), pairs, slow) == (kn.CLOSED, len(head), 6, [("s", "ac2g", 1)], b"")
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


# --- regressions: parity breaks these tests found, fixed (minimal inputs) -------------------


def test_regression_lone_surrogate_in_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Was: native let msgspec.DecodeError escape load_kineto. Both: kernel 0 kept, then "malformed JSON".
    pure, native, _ = load_both(write(tmp_path, doc([K(0), K(1, name="k\\ud800"), K(2)])), monkeypatch)
    assert_same(pure, native)


def test_regression_lone_surrogate_in_skipped_arg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    odd = K(1).replace('"args":{', '"args":{"foo":"\\udc00",')
    pure, native, _ = load_both(write(tmp_path, doc([K(0), odd, K(2)])), monkeypatch)
    # A lone surrogate is replaced by U+FFFD and counted (issue 13: it used to stop reading
    # there, losing every later event); both paths keep all 3 kernels and say so.
    assert pure.kernels.height == 3 and native.kernels.height == 3
    assert pure.meta["parse_stats"]["surrogates_replaced"] == 1
    assert pure.meta["warnings"] == native.meta["warnings"] == ["1 lone UTF-16 surrogate escapes replaced by U+FFFD"]


def test_regression_thread_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m1 = '{"ph":"M","name":"process_name","pid":"Spans","tid":0,"args":{"name":"spans"}}'
    m2 = '{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"main"}}'
    pure, native, _ = load_both(write(tmp_path, doc([m1, m2, K(0)])), monkeypatch)
    assert [t["pid"] for t in pure.meta["threads"]] == ["Spans", 1]  # file order
    assert [t["pid"] for t in native.meta["threads"]] == ["Spans", 1]  # was: native [1, "Spans"]


def test_regression_drop_reason_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both drops count 1. Ties were listed in insertion order, which differed between the paths;
    # now ties go by reason name on both: "cpu op …" before "device activity …".
    events = [K(0, dur="null"), OP("o", 1, "null").replace('"pid":1', '"pid":"1"'), OP("p", 2)]
    pure, native, _ = load_both(write(tmp_path, doc(events)), monkeypatch)
    assert pure.meta["warnings"][0].startswith("2 events dropped: cpu op")
    assert native.meta["warnings"] == pure.meta["warnings"]


def test_regression_input_types_depend_on_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = OP("a", 1, extra=',"args":{"Input type":[["x"]]}').replace('"pid":1', '"pid":"1"')  # slow
    b = OP("b", 2, extra=',"args":{"Input type":[null]}')
    pure, native, _ = load_both(write(tmp_path, doc([a, b])), monkeypatch)
    # A row's value no longer depends on its batch: a null item is null on both paths
    # (was: "null" when a nested list elsewhere in the batch sent the batch through msgspec).
    assert pure.ops["input_types"].to_list() == [['["x"]'], [None]]
    assert native.ops["input_types"].to_list() == [['["x"]'], [None]]


def test_regression_bool_note_depends_on_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = synthetic(12_000)
    events[1000] = events[1000].replace('"pid":1,', '"pid":true,')  # first half of the first window
    events[40000] = events[40000].replace('"pid":1,', '"pid":"1",')  # second half
    pure, native, _ = load_both(write(tmp_path, doc(events)), monkeypatch)
    want = {"cpu op pid: boolean converted": 1, "cpu op pid: numeric string converted": 1}
    assert pure.meta["parse_stats"]["coerced"] == want
    assert native.meta["parse_stats"]["coerced"] == want  # was: native missed the bool


def test_regression_all_ops_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pure, native, _ = load_both(write(tmp_path, doc([K(0), OP("o", 1, "null")])), monkeypatch)
    assert pure.ops.height == native.ops.height == 0


def test_damage_far_before_the_window_end_keeps_the_events_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2000 kernels (~200 KB, one window), a missing comma inside event 100's args: the 100
    # events ahead of it are kept on both paths. (The Python path used to look for event
    # boundaries only in the window's last 64 KB, found the error before all of them and kept
    # nothing: "trace has no events".)
    events = [K(i) for i in range(2000)]
    events[100] = events[100].replace('"correlation":', '"correlation" ')
    pure, native, _ = load_both(write(tmp_path, doc(events)), monkeypatch)
    assert pure.kernels.height == native.kernels.height == 100
    assert pure.meta["warnings"][0].startswith("malformed JSON at byte")
    assert_same(pure, native)


@pytest.mark.parametrize("seed", range(3))
def test_mutated_traces_same_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    import random

    from tracekit.errors import TracekitError
    from tracekit.sources.kineto.loader import load_kineto

    # Differential fuzzing: random byte edits, inserted odd fields and cuts of a real trace;
    # both loaders must give the same tables and meta, or the same one-line error.
    src = gzip.open(
        SHARED_TRACES / "kineto/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
    ).read()
    rnd = random.Random(seed)
    alphabet = b'{}[]",:\\ \n0123456789.-eEtrufalsnXM\x80\xc3\xa9\xff\x00u'
    inserts = [
        b'"pid": "x"',
        b'"ts": 1e3',
        b'"dur": -5',
        b'"args": null',
        b'"name": "a\\"b"',
        b'"id": 1.5',
        b"\\ud800",
        b'"External id": 99999999999999999999',
        b'"ph": "M"',
        b", 5",
        b"{}",
        b'"tid": true',
    ]
    for it in range(12):
        b = bytearray(src)
        for _ in range(rnd.randrange(1, 8)):
            k, op = rnd.randrange(len(b)), rnd.random()
            if op < 0.3:
                b[k] = rnd.choice(alphabet)
            elif op < 0.5:
                del b[k : k + rnd.randrange(1, 30)]
            elif op < 0.8:
                b[k:k] = rnd.choice(inserts)
            else:
                del b[k:]
        f = tmp_path / f"m{it}.json"
        f.write_bytes(bytes(b))
        got: list[Any] = []
        for mode in ("1", "0"):
            monkeypatch.setenv("TRACEKIT_PURE_PYTHON", mode)
            try:
                got.append(load_kineto(f))
            except TracekitError as exc:
                got.append(str(exc))
        if isinstance(got[0], str) or isinstance(got[1], str):
            assert got[0] == got[1], f"seed {seed} edit {it}"
        else:
            assert_same(got[0], got[1])
