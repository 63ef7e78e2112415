"""The hostile-input campaign kept in the tests (issue 13): seeded mutations of real traces.

Seeds are slices of the shared Kineto traces (real events of real GPUs). Each case mutates one
seed — structure-aware (a field set to a hostile value, removed, retyped; events duplicated,
reordered, replaced by non-objects; deep nesting; names with markup, controls, surrogates) or
byte-level (truncation, flipped bytes, inserted or repeated slices, a gzip cut) — and reads it
through both paths (native scanner and pure Python). A case passes when both paths end in a
typed one-line error, or both load the same tables with the same counts and warnings, within
the time limit. Nothing else (a traceback, a hang, a disagreement) passes.

Deterministic: case k uses ``random.Random(SEED * 1_000_003 + k)``; a failure names its case
number, and ``TRACEKIT_FUZZ_CASE=k`` reruns just that case. The budget is
``TRACEKIT_FUZZ_SECONDS`` (default 8 s in the test suite; ``.ci/run`` gives it 60 s).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tracekit.errors import TracekitError
from tracekit.sources.kineto.reading import native as kn
from tracekit.sources.kineto.loader import load_kineto

SEED = 13
SEED_FILES = (
    "kineto/hta/triton_example/triton_example.json.gz",
    "kineto/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "kineto/hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz",
    "kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
)
MAX_EVENTS = 300  # events kept per seed: each case stays small and fast
CASE_LIMIT_S = 20  # one case (both paths) taking longer is a hang
TABLES = ("kernels", "launches", "ops", "regions")

HOSTILE_VALUES: list[Any] = [
    None,
    True,
    -1,
    0,
    2**63 - 1,
    -(2**63),
    2**64,
    1.5,
    -0.0,
    "",
    "12.5",
    "x",
    [],
    {},
    [1, [2]],
    "<script>alert(1)</script>",
    "a\nb|c\x1b]0;t\x07",
    "$\\frac{a}{$",
    "\ud800",
    "\u202e",
    "é" * 50,
    "}, " * 80,  # more fake event boundaries than the reader backs off over
]
RAW_VALUES = [
    "1e400",
    "-1e400",
    "123456789012345678901234567890",
    "1E5",
    "0.0000001",
    "-0",
    "[" * 300 + "]" * 300,
    '"\\ud800"',
    '"\\udc00x"',
    '"a\\u0000b"',
    "9223372036854775807.9999",
]


def _seeds(shared: Path) -> list[dict[str, Any]]:
    out = []
    for rel in SEED_FILES:
        doc = json.loads(gzip.decompress((shared / rel).read_bytes()))
        doc["traceEvents"] = doc.get("traceEvents", [])[:MAX_EVENTS]
        out.append(doc)
    return out


def _mutate_structure(doc: dict[str, Any], rng: random.Random) -> str:
    doc = copy.deepcopy(doc)
    evs: list[Any] = doc["traceEvents"]
    raw: list[str] = []  # placeholders replaced by raw JSON text after dumping

    def value() -> Any:
        if rng.random() < 0.35:
            raw.append(rng.choice(RAW_VALUES))
            return f"\x00RAW{len(raw) - 1}\x00"
        return copy.deepcopy(rng.choice(HOSTILE_VALUES))

    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(8)
        if not evs:
            break
        i = rng.randrange(len(evs))
        e = evs[i]
        if op <= 2 and isinstance(e, dict) and e:  # a field of the event or of its args
            target = e["args"] if isinstance(e.get("args"), dict) and e["args"] and rng.random() < 0.5 else e
            key = rng.choice(sorted(target))
            if rng.random() < 0.2:
                del target[key]
            else:
                target[key] = value()
        elif op == 3:  # a known field set on any event
            if isinstance(e, dict):
                e[rng.choice(["ts", "dur", "pid", "tid", "name", "cat", "ph", "id", "args"])] = value()
        elif op == 4:
            evs.insert(rng.randrange(len(evs) + 1), copy.deepcopy(e))  # a duplicate
        elif op == 5:
            evs.insert(rng.randrange(len(evs) + 1), value())  # a non-object element
        elif op == 6:
            j = rng.randrange(len(evs))
            evs[i], evs[j] = evs[j], evs[i]
        else:
            doc[rng.choice(["baseTimeNanoseconds", "deviceProperties", "schemaVersion", "traceName"])] = value()
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
    for k, r in enumerate(raw):
        text = text.replace(f'"\\u0000RAW{k}\\u0000"', r)
    return text


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if not b:
            break
        at = rng.randrange(len(b))
        if op == 0:
            del b[at:]  # truncation
        elif op == 1:
            b[at] ^= 1 << rng.randrange(8)
        elif op == 2:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3:
            n = rng.randint(1, 64)
            b[at:at] = b[at : at + n] * rng.randint(1, 3)
        else:
            b[at:at] = rng.choice([b"}", b"]", b",", b'"', b"\\", b"{", b"\xff", b"\xed\xa0\x80", b" " * 100])
    return bytes(b)


def make_case(seeds: list[dict[str, Any]], k: int) -> tuple[bytes, bool]:
    """(file bytes, gzipped) of case ``k``."""
    rng = random.Random(SEED * 1_000_003 + k)
    doc = seeds[rng.randrange(len(seeds))]
    text = _mutate_structure(doc, rng) if rng.random() < 0.6 else json.dumps(doc)
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.5:
        data = _mutate_bytes(data, rng)
    gz = rng.random() < 0.25
    if gz:
        data = gzip.compress(data, 1)
        if rng.random() < 0.3:
            data = data[: rng.randrange(10, len(data))]
    return data, gz


class _Hang(Exception):
    pass


@contextmanager
def _limit(seconds: float) -> Iterator[None]:
    def alarm(signum: int, frame: Any) -> None:
        raise _Hang(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _read(path: Path, pure: bool, mp: pytest.MonkeyPatch) -> Any:
    if pure:
        mp.setenv("TRACEKIT_PURE_PYTHON", "1")
    else:
        mp.delenv("TRACEKIT_PURE_PYTHON", raising=False)
    try:
        return load_kineto(path)
    except TracekitError as exc:
        assert "\n" not in str(exc), f"multi-line error: {exc!r}"
        return exc


def check_case(path: Path, mp: pytest.MonkeyPatch) -> None:
    with _limit(CASE_LIMIT_S):
        pure = _read(path, True, mp)
        native = _read(path, False, mp) if kn.available() else pure
    if isinstance(pure, TracekitError) or isinstance(native, TracekitError):
        assert type(pure) is type(native), f"pure: {pure!r} | native: {native!r}"
        assert str(pure) == str(native)
        return
    for t in TABLES:
        assert pure.table(t).equals(native.table(t)), f"table {t} differs between the paths"
    assert pure.meta["parse_stats"] == native.meta["parse_stats"]
    assert pure.meta["warnings"] == native.meta["warnings"]
    assert pure.meta["threads"] == native.meta["threads"]
    for t in TABLES:
        df = pure.table(t)
        if df.height:
            assert (df["end_ns"] >= df["start_ns"]).all(), f"{t}: end < start"
            assert df["start_ns"].min() > -(1 << 62) and df["end_ns"].max() < 1 << 62  # type: ignore[operator]


def test_fuzz_both_paths(shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = _seeds(shared_traces)
    only = os.environ.get("TRACEKIT_FUZZ_CASE")
    budget = float(os.environ.get("TRACEKIT_FUZZ_SECONDS", "8"))
    cases = [int(only)] if only else range(1_000_000)
    t_end = time.monotonic() + budget
    done = 0
    for k in cases:
        if not only and time.monotonic() > t_end:
            break
        data, gz = make_case(seeds, k)
        path = tmp_path / (f"case{k}.json.gz" if gz else f"case{k}.json")
        path.write_bytes(data)
        try:
            check_case(path, monkeypatch)
        except BaseException as exc:  # noqa: BLE001 - name the case, then fail
            keep = Path(os.environ.get("TRACEKIT_FUZZ_KEEP", tmp_path)) / path.name
            keep.write_bytes(data)
            raise AssertionError(
                f"fuzz case {k} (TRACEKIT_FUZZ_CASE={k}; input kept at {keep}): {type(exc).__name__}: {exc}"
            ) from exc
        path.unlink()
        done += 1
    assert done >= 1
    print(f"fuzz: {done} cases in {budget:.0f} s budget")
