"""Trace ids: a readable stem plus a hash of the file (used by every loader and ingest)."""

from __future__ import annotations

import os
from pathlib import Path
import hashlib
import re


_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def make_trace_id(path: str | os.PathLike[str]) -> str:
    """A stable id for a trace file: a readable stem plus a hash of its size and whole content.

    The same file ingested twice gets the same id (so it replaces itself); two different files
    never share one, whatever their names (the whole file is hashed: a hash of only its first
    MiB let two files that differ later replace each other). Hashing reads the file once more
    (blake2b, about 1 GB/s: small next to reading it as a trace).
    """

    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key in _DIGESTS:  # an ingest asks several times per file; a changed file has a new key
        digest = _DIGESTS[key]
    else:
        h = hashlib.blake2b(digest_size=10)
        h.update(str(st.st_size).encode())
        with open(p, "rb") as fh:
            while True:
                block = fh.read(1 << 20)
                if not block:
                    break
                h.update(block)
        digest = _DIGESTS[key] = h.hexdigest()
        if len(_DIGESTS) > 4096:
            _DIGESTS.pop(next(iter(_DIGESTS)))
    stem = p.name
    for suffix in (".gz", ".json", ".sqlite", ".pt.trace"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)[:60].strip("._") or "trace"
    return f"{stem}-{digest}"
