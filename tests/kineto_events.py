"""Hand-made Kineto events for the bad-input and hostile-input tests (one definition instead of a
copy per test file). The native-scanner tests build theirs as raw JSON text (tests/kineto_both.py),
where the exact bytes matter."""

from __future__ import annotations

import json
from typing import Any

KERNEL: dict[str, Any] = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "pid": 0,
    "tid": 7,
    "ts": 100,
    "dur": 5,
    "args": {"device": 0, "stream": 7, "correlation": 1},
}


def kernel(i: int, **kw: Any) -> dict[str, Any]:
    """Kernel i: ts 100 + 10 i µs, 5 µs long, correlation i; ``kw`` replaces top-level keys."""
    d: dict[str, Any] = json.loads(json.dumps(KERNEL))
    d["ts"] = 100 + 10 * i
    d["args"]["correlation"] = i
    d.update(kw)
    return d
