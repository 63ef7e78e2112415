"""Trace ids: a readable stem plus a hash of the file (used by every loader and ingest)."""

from __future__ import annotations

import os
from pathlib import Path


def make_trace_id(path: str | os.PathLike[str]) -> str:
    """A stable id for a trace file: a readable stem plus a hash of its size and first MiB.

    The same file ingested twice gets the same id (so it replaces itself); two different files
    with the same name do not collide.
    """
    import hashlib
    import re

    p = Path(path)
    h = hashlib.blake2b(digest_size=6)
    size = p.stat().st_size
    h.update(str(size).encode())
    with open(p, "rb") as fh:
        h.update(fh.read(1 << 20))
    stem = p.name
    for suffix in (".gz", ".json", ".sqlite", ".pt.trace"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)[:60].strip("._") or "trace"
    return f"{stem}-{h.hexdigest()}"
