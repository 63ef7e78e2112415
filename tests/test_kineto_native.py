"""Native Kineto scanner (tracekit.sources.kineto._kscan): the same tables and meta as the pure-Python path
(TRACEKIT_PURE_PYTHON=1) on every shared trace and on hand-made edge cases, and the parity breaks
those found (regressions). Damaged input: test_kineto_native_bad_input.py; the scanner's own
answers: test_kineto_native_scan.py; shared helpers: kineto_both.py. Expected values derived by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

_kscan = pytest.importorskip("tracekit.sources.kineto._kscan")

from conftest import SHARED_TRACES  # noqa: E402
from kineto_both import K, OP, assert_same, doc, gz_param, load_both, synthetic, write  # noqa: E402
from tracekit.errors import EmptyTraceError, TraceFormatError  # noqa: E402
from tracekit.sources.kineto.reading import native as kn  # noqa: E402
from tracekit.sources.kineto.routes import FLOW_CATS, NATIVE_COLUMNS, X_ROUTES  # noqa: E402

LARGE = ("df_index_resolver", "mtia_trace_single_rank")

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
        "cpu op: ts missing, non-numeric or beyond ±2^63 ns": 4,
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
