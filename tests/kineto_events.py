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


H100: list[dict[str, Any]] = [
    {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "numSms": 132}
]


def write_trace(folder: Any, events: list[dict[str, Any]], name: str = "t", devices: Any = None) -> Any:
    """``events`` as ``folder/name.json``, a Kineto document on one H100 (``devices`` replaces it)."""
    from pathlib import Path

    p = Path(folder) / f"{name}.json"
    doc = {"schemaVersion": 1, "deviceProperties": H100 if devices is None else devices, "traceEvents": events}
    p.write_text(json.dumps(doc))
    return p


def cli_stdout(args: list[str], capsys: Any) -> str:
    """What ``tracekit ARGS`` prints, run in-process; a non-zero exit fails with its stderr."""
    from tracekit.cli.main import main

    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, (args, exc.code, capsys.readouterr().err)
    return str(capsys.readouterr().out)
