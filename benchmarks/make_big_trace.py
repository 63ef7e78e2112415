"""Make a large synthetic Kineto trace by replicating a real one with shifted timestamps.

    .venv/bin/python benchmarks/make_big_trace.py --copies 25 --out /tmp/big_trace.json

Each copy of the source's events is shifted by the source's time span (plus 1 ms) and its
correlation / flow ids are offset, so the copies follow one another like later iterations.
``distributedInfo`` is written *after* ``traceEvents`` (as some real traces do). The output
(≈ copies × 53.7 MB for the default source) stays out of the repository.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path
from typing import Any

import orjson

DEFAULT_SRC = (
    Path(__file__).resolve().parents[2] / "shared/traces/kineto/hta/df_index_resolver/df_index_resolver.json.gz"
)
ID_STEP = 10_000_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--copies", type=int, default=25)
    ap.add_argument("--out", type=Path, default=Path("/tmp/big_trace.json"))
    a = ap.parse_args()
    raw = a.src.read_bytes()
    doc: dict[str, Any] = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events: list[dict[str, Any]] = doc.pop("traceEvents")
    dist = doc.pop("distributedInfo", None)
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    step = int(max(ts) - min(ts)) + 1000  # µs
    tmp = a.out.with_name(a.out.name + ".part")
    with open(tmp, "wb") as fh:
        fh.write(b"{\n")
        for k, v in doc.items():
            fh.write(orjson.dumps(k) + b": " + orjson.dumps(v) + b",\n")
        fh.write(b'"traceEvents": [\n')
        first = True
        for c in range(a.copies):
            for e in events:
                if c:
                    _shift(e, step, ID_STEP)
                if not first:
                    fh.write(b",\n")
                fh.write(orjson.dumps(e))
                first = False
        fh.write(b"\n]")
        if dist is not None:
            fh.write(b',\n"distributedInfo": ' + orjson.dumps(dist))
        fh.write(b"\n}\n")
    tmp.replace(a.out)
    print(f"{a.out}: {a.out.stat().st_size / 1e6:.1f} MB, {a.copies * len(events)} events")


def _shift(e: dict[str, Any], dt_us: int, did: int) -> None:
    if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
        e["ts"] += dt_us
    if "id" in e and isinstance(e["id"], int):
        e["id"] += did
    args = e.get("args")
    if isinstance(args, dict):
        for key in ("correlation", "External id"):
            if isinstance(args.get(key), int):
                args[key] += did


if __name__ == "__main__":
    main()
