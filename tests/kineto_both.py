"""Helpers of the native-scanner tests (tests/test_kineto_native*.py): load one file on both Kineto
paths (pure Python with TRACEKIT_PURE_PYTHON=1, then the C scanner) and compare their tables and
meta; write a hand-made trace; build its events (a kernel K, a CPU op OP, a synthetic run)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from polars.testing import assert_frame_equal

from tracekit.sources.kineto.reading import native as kn
from tracekit.sources.kineto.loader import load_kineto
from tracekit.tables.trace import Trace

TABLES = ("kernels", "launches", "ops", "regions")


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
