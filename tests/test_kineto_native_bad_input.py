"""Native Kineto scanner on damaged input: cut-off files, malformed JSON, elements that are not
objects, a bare array, a repeated key, damage far before a window's end and randomly mutated real
traces; both paths (pure Python and the C scanner) must give the same tables and meta, or the same
error. Shared helpers: kineto_both.py. Expected values derived by hand."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import pytest

_kscan = pytest.importorskip("tracekit.sources.kineto._kscan")

from conftest import SHARED_TRACES  # noqa: E402
from kineto_both import K, assert_same, doc, gz_param, load_both, write  # noqa: E402


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
