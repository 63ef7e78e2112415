"""Trace ids: a readable stem plus a hash of the file (used by every loader and ingest)."""

from __future__ import annotations

import os
from pathlib import Path
import hashlib
import re
from typing import Any

import xxhash


_DIGESTS: dict[tuple[str, str, int, int, int], str] = {}
# An id's digest: 32 hex digits (xxh3_128). Ids written before it have 20 (blake2b, 80 bits).
LEGACY_DIGEST_HEX = 20
_LEGACY = re.compile(rf"-[0-9a-f]{{{LEGACY_DIGEST_HEX}}}")


def make_trace_id(path: str | os.PathLike[str]) -> str:
    """A stable id for a trace file: a readable stem plus a hash of its size and whole content.

    The same file ingested twice gets the same id (so it replaces itself); two different files
    never share one, whatever their names (the whole file is hashed: a hash of only its first
    MiB let two files that differ later replace each other). The hash is xxh3_128: the file is
    read once more, at about the speed of reading it from the page cache (blake2b, used before,
    was several times slower and ran serially before reading; BENCHMARKS.md has the figures).
    """

    return f"{trace_stem(path)}-{_digest(Path(path), 'xxh3_128')}"


def legacy_trace_id(path: str | os.PathLike[str]) -> str:
    """The id an older tracekit gave this file (blake2b of its size and content, 20 hex digits):
    an ingest recognises the file's earlier copy in a dataset by it (tracekit/ingest.py)."""

    return f"{trace_stem(path)}-{_digest(Path(path), 'blake2b')}"


def is_legacy_id(trace_id: str, stem: str) -> bool:
    """True when ``trace_id`` is an older tracekit's id of a file named with ``stem``."""

    return trace_id.startswith(stem) and _LEGACY.fullmatch(trace_id[len(stem) :]) is not None


def trace_stem(path: str | os.PathLike[str]) -> str:
    """The readable part of a trace id: the file name without its trace suffixes, made safe."""

    stem = Path(path).name
    for suffix in (".gz", ".json", ".sqlite", ".pt.trace"):
        stem = stem.removesuffix(suffix)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)[:60].strip("._") or "trace"


def _digest(p: Path, kind: str) -> str:
    st = p.stat()
    key = (kind, str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key in _DIGESTS:  # an ingest asks several times per file; a changed file has a new key
        return _DIGESTS[key]
    h: Any = xxhash.xxh3_128() if kind == "xxh3_128" else hashlib.blake2b(digest_size=LEGACY_DIGEST_HEX // 2)
    h.update(str(st.st_size).encode())
    with open(p, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    digest = _DIGESTS[key] = h.hexdigest()
    if len(_DIGESTS) > 4096:
        _DIGESTS.pop(next(iter(_DIGESTS)))
    return digest
