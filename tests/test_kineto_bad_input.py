"""Damaged and odd Kineto input: tiny files built here, with every count derived by hand."""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest

from cli_run import tk, tk_process
from tracekit.errors import EmptyTraceError, TraceFormatError, UnsupportedFormatError
from tracekit.sources.kineto.reading import window
from tracekit.sources.kineto.loader import load_kineto

from kineto_events import kernel  # noqa: E402


def pretty_trace(events: list[dict[str, Any]], **top: Any) -> str:
    """Kineto-like layout: one event per block, args nested (so `}` also closes args)."""
    body = ",\n".join("  " + json.dumps(e, indent=2).replace("\n", "\n  ") for e in events)
    head = "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in top.items())
    return "{\n" + head + '  "traceEvents": [\n' + body + "\n  ]\n}\n"


def test_json_cut_mid_event_keeps_complete_events(tmp_path: Path) -> None:
    events = [kernel(i) for i in range(10)]
    text = pretty_trace(events, schemaVersion=1)
    # Cut in the middle of the 8th event (index 7): its opening brace is the 8th '{\n    "ph"'.
    starts = [i for i in range(len(text)) if text.startswith('{\n    "ph"', i)]
    assert len(starts) == 10
    cut = starts[7] + 40
    f = tmp_path / "cut.json"
    f.write_text(text[:cut])
    tr = load_kineto(f)
    # 7 complete events (indices 0..6) survive; the partial 8th is the lost tail.
    assert tr.kernels.height == 7
    assert tr.kernels["correlation"].to_list() == list(range(7))
    ps = tr.meta["parse_stats"]
    assert ps["truncated"] is True
    assert ps["bytes_lost"] == len(text[starts[7] : cut].strip())
    assert any("cut off" in w for w in tr.meta["warnings"])


def test_json_cut_inside_a_string_with_braces(tmp_path: Path) -> None:
    # A name containing '}, {' must not be taken for an event boundary.
    events = [kernel(0), kernel(1, name='weird"}, {"name": "x'), kernel(2)]
    text = pretty_trace(events)
    f = tmp_path / "t.json"
    f.write_text(text)
    tr = load_kineto(f)
    assert tr.kernels["name"].to_list() == ["k", 'weird"}, {"name": "x', "k"]
    # Cut right after the brace inside the string: the second event is incomplete.
    cut = text.index('\\"}, {') + len('\\"}')
    assert text[cut - 1] == "}" and text[cut] == ","  # a boundary candidate inside the string
    f.write_text(text[:cut])
    tr = load_kineto(f)
    assert tr.kernels.height == 1


def test_gzip_truncated_stream(tmp_path: Path) -> None:
    events = [kernel(i) for i in range(6)]
    text = pretty_trace(events).encode()
    # Compress the part up to and including the 4th event's ",", flush, then the rest; cut the
    # compressed bytes at the flush point so exactly that prefix decompresses.
    starts = [i for i in range(len(text)) if text.startswith(b'{\n    "ph"', i)]
    split = starts[4]
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = c.compress(text[:split]) + c.flush(zlib.Z_FULL_FLUSH)
    full = head + c.compress(text[split:]) + c.flush()
    assert gzip.decompress(full) == text
    f = tmp_path / "trace.json.gz"
    f.write_bytes(head)
    tr = load_kineto(f)
    assert tr.kernels.height == 4
    assert tr.meta["parse_stats"]["truncated"] is True
    assert any("gzip stream is truncated" in w for w in tr.meta["warnings"])


def test_tiny_batches_give_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Many batches (a 64-byte window) must split exactly where one big batch does.
    events = [kernel(i, name=f"k{i}" + "}, {" * (i % 3)) for i in range(50)]
    f = tmp_path / "t.json"
    f.write_text(pretty_trace(events))
    whole = load_kineto(f)
    monkeypatch.setattr(window, "CHUNK_BYTES", 64)
    small = load_kineto(f)
    assert small.kernels.equals(whole.kernels)
    assert small.kernels.height == 50


@pytest.mark.parametrize(
    ("content", "error", "words"),
    [
        (b"", EmptyTraceError, "empty file"),
        (b"  \n ", EmptyTraceError, "empty file"),
        (b"hello world", TraceFormatError, "not JSON"),
        (b'{"a": 1, "b": [1, 2]}', TraceFormatError, "not a trace"),
        (b"[1, 2, 3]", TraceFormatError, "not a trace"),
        (b'{"traceEvents": []}', EmptyTraceError, "no events"),
        (b'{"traceEvents": [', EmptyTraceError, "no events"),
    ],
)
def test_unreadable_files_raise_one_line_errors(tmp_path: Path, content: bytes, error: type, words: str) -> None:
    f = tmp_path / "x.json"
    f.write_bytes(content)
    with pytest.raises(error) as exc:
        load_kineto(f)
    msg = str(exc.value)
    assert words in msg and str(f) in msg and "\n" not in msg


def test_sqlite_and_nsys_rep_refused(tmp_path: Path, shared_traces: Path) -> None:
    db = tmp_path / "x.sqlite"
    sqlite3.connect(db).execute("create table t(a)").connection.commit()
    with pytest.raises(UnsupportedFormatError, match="SQLite"):
        load_kineto(db)
    rep = shared_traces / "nsys/fuser/report1_64ee035d.nsys-rep"
    with pytest.raises(UnsupportedFormatError, match="nsys export"):
        load_kineto(rep)


def test_bad_events_counted_by_reason(tmp_path: Path) -> None:
    evs: list[Any] = [kernel(0), kernel(1, args={"device": 0, "stream": 7, "correlation": 2**70}), kernel(2), kernel(2)]
    evs.append({k: v for k, v in kernel(3).items() if k != "ts"})
    evs.append({k: v for k, v in kernel(4).items() if k != "dur"})
    evs.append(kernel(5, ts="abc"))
    evs.append(kernel(6, dur=-3))
    evs.append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": "12", "tid": 1, "ts": 10, "dur": 1})
    evs.append({"ph": "X", "cat": "cpu_op", "name": "op2", "pid": "host", "tid": 1, "ts": 20, "dur": 1})
    evs.append({"ph": "X", "cat": 5, "name": "x", "ts": 1, "dur": 1})
    evs.append({"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1, "args": [1]})
    text = json.dumps({"traceEvents": evs})[:-2]
    text += ', 42, {"ph": "X", "cat": "cpu_op", "name": "bad\udcff", "pid": 1, "tid": 1, "ts": 30, "dur": 1}]}'
    f = tmp_path / "bad.json"
    f.write_bytes(text.encode("utf-8", "surrogateescape"))  # \xff: invalid UTF-8 in a name
    tr = load_kineto(f)
    ps = tr.meta["parse_stats"]
    # 14 events: kernels 0, 1, 2 kept (the second "2" is a duplicate); 3 (no ts), 4 (no dur),
    # 5 (ts "abc"), 6 (dur < 0) dropped; ops "op", "op2", "bad\ufffd" kept; 3 invalid events.
    assert ps["events_read"] == 14
    assert ps["events_kept"] == 6
    assert ps["dropped"] == {
        "device activity: duplicate event": 1,
        "device activity: dur missing, non-numeric or beyond ±2^63 ns": 1,
        "device activity: ts missing, non-numeric or beyond ±2^63 ns": 2,
        "device activity: negative duration": 1,
        "invalid event: Expected `object`, got `array` at `$.args`": 1,
        "invalid event: Expected `object`, got `int`": 1,
        "invalid event: Expected `str | null`, got `int` at `$.cat`": 1,
    }
    assert ps["coerced"] == {
        "cpu op pid: non-numeric string (nulled)": 1,
        "cpu op pid: numeric string converted": 1,
        "device activity correlation: integer beyond int64 (nulled)": 1,
    }
    assert ps["utf8_replaced"] == 1
    assert tr.ops.sort("start_ns")["name"].to_list() == ["op", "op2", "bad\ufffd"]
    assert tr.ops.sort("start_ns")["pid"].to_list() == [12, None, 1]
    assert tr.kernels.sort("start_ns")["correlation"].to_list() == [0, None, 2]


def test_2021_categories_epoch_us_and_trailing_distributed_info(tmp_path: Path) -> None:
    evs = [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 5, "tid": 6, "ts": 1612000000000100, "dur": 50},
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 5,
            "tid": 6,
            "ts": 1612000000000110,
            "dur": 5,
            "args": {"correlation": 9},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "sgemm",
            "pid": 0,
            "tid": 7,
            "ts": 1612000000000120,
            "dur": 30,
            "args": {"device": 0, "stream": 7, "correlation": 9},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 1612000000000200,
            "dur": 4,
            "args": {"device": 0, "stream": 7, "bytes": 4096},
        },
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1612000000000210, "dur": 1},
        {"ph": "X", "cat": "User", "name": "step", "pid": 5, "tid": 6, "ts": 1612000000000090, "dur": 200},
    ]
    text = json.dumps({"schemaVersion": 1, "traceEvents": evs, "distributedInfo": {"rank": 2, "world_size": 4}})
    f = tmp_path / "old.json"
    f.write_text(text)
    tr = load_kineto(f)
    assert tr.kernels.sort("start_ns")["kind"].to_list() == ["kernel", "memcpy", "memset"]
    assert tr.kernels.sort("start_ns")["copy_kind"].to_list() == [None, "HtoD", None]
    assert tr.kernels.filter(kind="memcpy")["bytes"].item() == 4096
    assert tr.launches["api"].to_list() == ["runtime"] and tr.ops.height == 1
    assert tr.regions["kind"].to_list() == ["user_annotation"]
    # integer epoch µs → ns: 1612000000000120 µs × 1000.
    assert tr.kernels.filter(kind="kernel")["start_ns"].item() == 1_612_000_000_000_120_000
    assert tr.meta["distributed"] == {"rank": 2, "world_size": 4, "backend": None}
    assert tr.meta["time_base_ns"] == 0 and tr.meta["time_base"] == "epoch_us"


def test_base_time_and_fractional_ns(tmp_path: Path) -> None:
    evs = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "a",
            "pid": 0,
            "tid": 7,
            "ts": 5172723568236.703,
            "dur": 1.5,
            "args": {"device": 0, "stream": 7},
        },
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 1712195495519689.047, "dur": 0.001},
    ]
    f = tmp_path / "t.json"
    f.write_text(
        '{"traceEvents": '
        + json.dumps(evs).replace("1712195495519689.0", "1712195495519689.047")
        + ', "baseTimeNanoseconds": 1000000000000000000}'
    )
    tr = load_kineto(f)
    k = tr.kernels.sort("name")
    base = 1_000_000_000_000_000_000
    # a: 5172723568236.703 µs = 5172723568236703 ns, + base; end = + 1500 ns.
    assert k["start_ns"].to_list() == [base + 5_172_723_568_236_703, base + 1_712_195_495_519_689_047]
    assert k["end_ns"].to_list() == [base + 5_172_723_568_238_203, base + 1_712_195_495_519_689_048]
    assert tr.meta["time_base"] == "baseTimeNanoseconds"


def test_cli_errors_are_one_line_with_nonzero_exit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    for args in (["summary", str(bad)], ["ingest", str(empty_dir), "--out", str(tmp_path / "ds")]):
        code, out, err = tk(*args)
        assert code != 0
        assert "Traceback" not in err + out
        lines = [ln for ln in err.splitlines() if ln.startswith("tracekit: error:")]
        assert len(lines) == 1


def test_zero_length_op_nests_inside_its_parent(tmp_path: Path) -> None:
    # Integer-µs traces record tiny ops with dur 0. gather [76, 112] holds as_strided [89, 89]
    # (depth 1) and then as_strided [90, 91] (depth 1, parent gather — not the zero-length one).
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": d}
        for n, ts, d in (("gather", 76, 36), ("as_strided_a", 89, 0), ("as_strided_b", 90, 1))
    ]
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"traceEvents": evs}))
    ops = load_kineto(f).ops.sort("start_ns")
    ids = dict(zip(ops["name"], ops["op_id"]))
    assert ops["depth"].to_list() == [0, 1, 1]
    assert ops["parent_id"].to_list() == [None, ids["gather"], ids["gather"]]


def test_integer_fast_path_equals_exact_text_path() -> None:
    # ns_from_raw takes a msgspec int path when the first value is an integer literal; it must
    # give exactly what the decimal-text path gives, including the values that force a fallback.
    import msgspec
    import polars as pl

    from tracekit.sources.kineto.reading.columns import ns_from_raw, ns_from_text

    cases = [
        [b"1669783687464181", b"12", b"-0", b"0"],  # all ints: 1669783687464181000 ns, ...
        [b"5", b"1712195495519689.047", b"null"],  # a float and a null later: text path
        [b"9223372036854776", b"9223372036854775807"],  # past int64 ns once × 1000 → null
        [b"7", b'"8"'],  # a quoted number
    ]
    for raw in cases:
        raws = [msgspec.Raw(b) for b in raw]
        text = pl.Series([None if b == b"null" else b.decode() for b in raw], dtype=pl.String())
        want = text.to_frame("t").select(ns_from_text(pl.col("t"))).to_series().to_list()
        assert ns_from_raw(raws).to_list() == want, raw
    assert ns_from_raw([msgspec.Raw(b"1669783687464181")]).to_list() == [1669783687464181000]


def test_json_array_without_trace_events_is_refused(tmp_path: Path, shared_traces: Path) -> None:
    """A JSON array that is a config list, not trace events: one-line refusal for a file; skipped
    and listed (not fatal) when its folder is ingested (issue 17)."""
    import gzip

    from tracekit.errors import NotATraceError
    from tracekit.sources import sniff

    cfg = shared_traces / "kineto/tracelens/inference/sglang_decode/capture_traces/execution_details.json"
    with pytest.raises(NotATraceError, match=r'a JSON array with no trace events \(no element has a "ph" field\)'):
        sniff(cfg)
    gz = tmp_path / "cfg.json.gz"
    gz.write_bytes(gzip.compress(b'[{"file": "x.json.gz", "batch_size": 32}]'))
    with pytest.raises(NotATraceError):
        sniff(gz)
    ev = tmp_path / "events.json"
    ev.write_text('[{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]')
    assert sniff(ev) == "kineto"  # an array of trace events is still a trace
    r = tk_process("summary", cfg)
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    # The capture_traces/ folder itself: inside a directory argument it belongs to the trace beside
    # it and is merged on load, not walked (docs/kineto.md).
    folder = shared_traces / "kineto/tracelens/inference/sglang_decode/capture_traces"
    r = tk_process("ingest", folder, "--out", tmp_path / "ds")
    assert r.returncode == 0, r.stderr
    assert f"{cfg}: skipped: a JSON array with no trace events" in r.stdout
    assert "ingested 1 of 1 traces" in r.stdout and "skipped 1 file that is not a trace" in r.stdout


def test_grid_and_block_text_to_integers() -> None:
    """kernels' grid_x..block_z come from the args' list text through columns.dims, then item i
    (null past the end). By hand: "[128, 1, 1]" → 128, 1, 1; "[ 7 ,2]" (blanks, two items) → 7, 2,
    null; "[4, x, 9]" → 4, null, 9 (x is not an integer); "[]" → null ×3; null text → null ×3."""
    import polars as pl

    from tracekit.sources.kineto.reading.columns import dims

    s = pl.DataFrame({"g": ["[128, 1, 1]", "[ 7 ,2]", "[4, x, 9]", "[]", None]})
    got = s.select(dims(pl.col("g")).alias("l")).select(
        *[pl.col("l").list.get(i, null_on_oob=True).alias(str(i)) for i in range(3)]
    )
    assert got.rows() == [(128, 1, 1), (7, 2, None), (4, None, 9), (None, None, None), (None, None, None)]
