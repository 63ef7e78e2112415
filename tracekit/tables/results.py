"""Analysis results stored beside a trace in its dataset, so re-running ``tracekit analyze`` on an
unchanged dataset with the same options reads the result instead of recomputing it.

Layout (the dataset's hive layout; no other reader looks in it)::

    DIR/analysis_results/trace_id=<id>/<key>.json

An entry is three parts: its first line is the compact JSON ``{"key", "source", "sidecar"}`` checked
by :func:`lookup`; then the analysis document exactly as ``tracekit analyze --format json``
prints it (indented, terminal-safe); then, after the document's last newline, a trailer
``{"size", "blake2b"}`` of the document, checked before it is printed (an entry whose document
was cut or edited, its check line intact, is a miss: the analysis recomputes it). A hit for
``--format json`` therefore writes those bytes as they are — no decoding or re-encoding of a
document of several MB, one blake2b pass over it (≈ 1 GB/s) — and, when it is longer than one
piece (8 MiB), reads them again as it prints them (:class:`Stored`): the document is never held
whole, so a hit has no size cap (the text screen, which decodes it whole, recomputes one over
``RESULT_MAX_BYTES``).

``key`` hashes everything the result depends on that can be known *without importing polars*
(the point: a hit costs an interpreter and this lookup, through the console script's shortcut
(tracekit/cli/fast.py) or through click, well under what importing polars alone costs):

- the tracekit version and the path, size and modification time (ns) of every
  ``tracekit/**/*.py`` file (any code change is a miss; the rule Python uses for its bytecode cache);
- the analysis options as given (hardware name, or the content of a hardware file; phase map;
  SLO; thresholds);
- the path, size and modification time (ns) of every file of this trace in the dataset (its
  canonical tables, ``meta`` and derived tables): re-ingesting the trace is a miss — and
  :func:`tracekit.tables.trace.commit_staged` removes this folder with the trace's other stale
  partitions.

The analysis also reads the runner's sidecar beside the *source* trace file (``read_sidecar``),
whose path is in ``meta`` (Parquet). So an entry records which sidecar it saw (path, size,
mtime) in ``check``, and a lookup that finds a different one is a miss.

Writing is best effort (a read-only dataset simply gets no entry) and atomic (temporary file,
then rename). Nothing here imports polars.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from contextlib import suppress
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import IO, Any, BinaryIO

from tracekit.conventions import find_sidecar
from tracekit.errors import DatasetError
from tracekit.inputs import open_input
from tracekit.tables.layout import choose_trace, dataset_trace_ids

RESULTS_TABLE = "analysis_results"
RESULTS_FORMAT = 3  # 3: the trailer with the document's size and digest
KEEP = 8  # entries kept per trace (the most recently written)


def analysis_options(
    hardware: str | None, phase_map: tuple[str, ...] | list[str], slo: str | None, thresholds: str | None
) -> dict[str, Any]:
    """The options a stored result is keyed by, as ``tracekit analyze`` gives them (one place, so
    the console script's shortcut and the command build the same key)."""
    return {"hardware": hardware, "phase_map": list(phase_map), "slo": slo, "thresholds": thresholds}


def dataset_trace(root: Path, trace_id: str | None) -> str | None:
    """The trace an analysis of ``root`` would read: ``trace_id`` (or the one id it is a prefix
    of) when complete there, the only trace when there is one; None otherwise (the normal path
    then reports the error)."""
    try:
        return choose_trace(root, dataset_trace_ids(root), trace_id)
    except (OSError, DatasetError):
        return None


def _code_hash(pkg: Path | None = None) -> str:
    """The identity of the installed code: path, size and modification time (ns) of every
    ``tracekit/**/*.py`` file — the rule by which Python itself tells its cached bytecode is
    current (an edit changes the size or the time). Stats only, which keeps a stored result's
    start-up short: reading and hashing the files cost several times more."""
    # The package version needs no import of the root package (which would put tables/ above
    # sources/ in the layers contract): tracekit/__init__.py, where it is set, is among the files.
    pkg = pkg or Path(__file__).resolve().parent.parent
    h = hashlib.sha256(f"tracekit; results {RESULTS_FORMAT}; {pkg}".encode())
    for rel, size, mtime_ns in sorted(_py_files(str(pkg), "")):
        h.update(f"{rel}\0{size}\0{mtime_ns}\0".encode())
    return h.hexdigest()


def _py_files(folder: str, rel: str) -> list[tuple[str, int, int]]:
    """(path relative to the package, size, mtime ns) of every ``.py`` file under ``folder``."""
    out: list[tuple[str, int, int]] = []
    with os.scandir(folder) as entries:
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    out += _py_files(e.path, f"{rel}{e.name}/")
            elif e.name.endswith(".py"):
                st = e.stat()
                out.append((rel + e.name, st.st_size, st.st_mtime_ns))
    return out


def result_key(root: Path, trace_id: str, options: dict[str, Any]) -> str | None:
    """The key of the result of analysing ``trace_id`` of ``root`` with ``options`` (see the
    module docstring); None when a file cannot be read (then nothing is stored or looked up)."""
    h = hashlib.sha256(_code_hash().encode())
    opts = dict(options)
    hw = opts.get("hardware")
    try:
        if hw is not None and (Path(str(hw)).is_file() or str(hw).endswith(".json")):
            opts["hardware"] = ["file", hashlib.sha256(Path(str(hw)).read_bytes()).hexdigest()]
        h.update(json.dumps(opts, sort_keys=True, default=str).encode())
        for d in sorted(root.glob(f"*/trace_id={trace_id}")):
            if d.parent.name == RESULTS_TABLE or d.parent.name.startswith("."):
                continue
            for f in sorted(d.iterdir()):
                st = f.stat()
                h.update(f"{f.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    except OSError:
        return None
    return h.hexdigest()[:32]


def _sidecar_state(source: str | None) -> list[Any] | None:
    p = find_sidecar(source) if source else None
    if p is None:
        return None
    try:
        st = p.stat()
    except OSError:
        return None
    return [str(p), st.st_size, st.st_mtime_ns]


def lookup(root: str | os.PathLike[str], trace_id: str | None, options: dict[str, Any]) -> Stored | None:
    """The stored analysis document of this dataset trace and options (the bytes ``analyze
    --format json`` prints, read from the entry as they are printed: :class:`Stored`), or None
    (no entry, stale, unreadable). An entry is untrusted input: any failure reading or checking
    it — whatever it raises — is a miss (the analysis recomputes)."""
    try:
        return _lookup(Path(root), trace_id, options)
    except Exception:  # noqa: BLE001 - a tampered entry (TypeError, RecursionError, ...) is a miss
        return None


# Bytes a stored document may not hold raw: C0 controls but the newline, DEL, C1 controls (UTF-8
# C2 80–9F) and the bidi marks (U+202A–202E, U+2066–2069). tracekit writes them as JSON escapes, so
# an entry holding one was not written by it (a replaced document whose trailer was recomputed
# would print an OSC 52 escape to the terminal).
_C0 = bytes([*range(0x00, 0x0A), *range(0x0B, 0x20), 0x7F])
# one literal-prefixed pattern each: a search many times faster than one alternation (22 MB: 50 ms, not 0.6 s)
_RAW_MULTIBYTE = tuple(re.compile(p) for p in (rb"\xc2[\x80-\x9f]", rb"\xe2\x80[\xaa-\xae]", rb"\xe2\x81[\xa6-\xa9]"))
_SPAN = 2  # a multibyte pattern is at most this many bytes longer than one: the overlap of two pieces' checks


def _raw_controls(doc: bytes) -> bool:
    return len(doc.translate(None, _C0)) != len(doc) or any(p.search(doc) for p in _RAW_MULTIBYTE)


_CHECK_MAX_BYTES = 64 << 10  # the check line: a key, a path and a sidecar's state
# The form of every document tracekit stores: an indented object whose first key is its version,
# ending in a closing brace and a newline.
_DOC_HEAD = re.compile(rb'\{\n  "version": [0-9]+,\n')
_DOC_END = b"\n}\n"
_PIECE = 8 << 20  # a stored document is checked and printed this many bytes at a time


class StoredChanged(DatasetError):
    """A stored result that no longer matched its checks while it was printed (changed in place)."""


class Stored:
    """A stored document that passed every check (:func:`lookup`): ``size`` bytes at ``start`` of
    the entry's open file. One of at most :data:`_PIECE` bytes is kept as it was checked
    (``whole``); a longer one is read again by :meth:`pieces` as it is printed, so it is never held
    whole (a big trace's is hundreds of MB), each piece checked again for terminal-unsafe bytes
    before it is passed on (the entry may have been written in place since)."""

    def __init__(self, fh: IO[bytes], start: int, size: int, whole: bytes | None) -> None:
        self.fh, self.start, self.size, self.whole = fh, start, size, whole

    def __len__(self) -> int:
        return self.size

    def pieces(self) -> Iterator[bytes]:
        """The document, :data:`_PIECE` bytes at a time; :class:`StoredChanged` where the entry
        changed since it was checked: cut short, or a terminal-unsafe byte (the pieces before
        were passed on)."""
        with self.fh:
            if self.whole is not None:
                yield self.whole
                return
            for piece in _pieces(self.fh, self.start, self.size):
                if piece is None:
                    raise StoredChanged("the stored analysis result changed while it was printed")
                yield piece

    def read(self) -> bytes:
        """The whole document (the text screen decodes it at once)."""
        return b"".join(self.pieces())

    def close(self) -> None:
        self.fh.close()


def _pieces(fh: IO[bytes], start: int, size: int) -> Iterator[bytes | None]:
    """The ``size`` bytes at ``start`` of ``fh``, :data:`_PIECE` at a time (read at their offsets:
    nothing read ahead and kept), then None where the file ends before them or a piece holds a
    terminal-unsafe byte (a pattern across two pieces too)."""
    fd, at, end, last = fh.fileno(), start, start + size, b""
    while at < end:
        piece = os.pread(fd, min(_PIECE, end - at), at)
        if not piece or _raw_controls(piece) or _raw_controls(last + piece[:_SPAN]):
            yield None
            return
        at += len(piece)
        last = piece[-_SPAN:]
        yield piece


def _safe_digest(fh: IO[bytes], start: int, size: int, kept: list[bytes]) -> str | None:
    """The digest of the ``size`` bytes at ``start`` of ``fh`` (:func:`_pieces`; the one piece of
    a document that is one put in ``kept``); None where they hold a terminal-unsafe byte or the file
    ends before them."""
    digest = hashlib.blake2b(digest_size=16)
    for piece in _pieces(fh, start, size):
        if piece is None:
            return None
        digest.update(piece)
        if len(piece) == size:
            kept.append(piece)
    return digest.hexdigest()


def _lookup(base: Path, trace_id: str | None, options: dict[str, Any]) -> Stored | None:
    tid = dataset_trace(base, trace_id)
    if tid is None:
        return None
    key = result_key(base, tid, options)
    if key is None:
        return None
    entry = base / RESULTS_TABLE / f"trace_id={tid}" / f"{key}.json"
    try:  # stat first (on the open descriptor): a link, FIFO or device is not read
        fh = open_input(entry, follow=False)
    except OSError:
        return None
    try:
        found = _entry_parts(fh, key)
    except Exception:  # noqa: BLE001 - a miss, the file closed
        found = None
    if found is None:
        fh.close()
        return None
    return Stored(fh, *found)


def _entry_parts(fh: IO[bytes], key: str) -> tuple[int, int, bytes | None] | None:
    """(start, size, the document itself when it is one :data:`_PIECE`) of the document in the open
    entry ``fh`` when its check line is this ``key``'s and its document has the stored form, no
    terminal-unsafe byte and the trailer's size and digest; None otherwise. Read in pieces: a longer
    document is never held whole."""
    total = os.fstat(fh.fileno()).st_size
    head = fh.readline(_CHECK_MAX_BYTES + 1)
    if not head.endswith(b"\n"):
        return None
    start = len(head)
    at = max(start, total - _CHECK_MAX_BYTES - 1)  # the trailer: after the document's last newline
    fh.seek(at)
    tail = fh.read(total - at)
    cut = tail.rfind(b"\n")
    if cut < 0:
        return None
    size = at + cut + 1 - start
    fh.seek(start)
    form = _DOC_HEAD.match(fh.read(64))
    fh.seek(start + size - len(_DOC_END))
    if form is None or size < form.end() + len(_DOC_END) or fh.read(len(_DOC_END)) != _DOC_END:
        return None
    check, trailer = json.loads(head), json.loads(tail[cut + 1 :])
    if not isinstance(check, dict) or check.get("key") != key:
        return None
    source, sidecar = check.get("source"), check.get("sidecar")
    if not (source is None or isinstance(source, str)) or not (sidecar is None or isinstance(sidecar, list)):
        return None
    if _sidecar_state(source) != sidecar or not isinstance(trailer, dict) or trailer.get("size") != size:
        return None
    kept: list[bytes] = []
    if trailer != {"size": size, "blake2b": _safe_digest(fh, start, size, kept)}:
        return None  # the document is not the one written (cut short, edited), or holds unsafe bytes
    return start, size, kept[0] if kept else None


def store(root: str | os.PathLike[str], trace_id: str, options: dict[str, Any], source: str | None, doc: bytes) -> bool:
    """Store ``doc`` (the analysis document as ``analyze --format json`` prints it) for this
    dataset trace and options; ``source`` is the trace file the dataset was ingested from (its
    sidecar is checked on lookup). False when it could not be written (read-only dataset, ...).
    Never raises for I/O."""
    entry = _Entry(Path(root), trace_id, options, source)
    entry.write(doc)
    return entry.commit()


def storing(
    root: str | os.PathLike[str], trace_id: str, options: dict[str, Any], source: str | None, parts: Iterable[bytes]
) -> Iterator[bytes]:
    """The pieces ``parts`` of the document, passed on as they come (to be printed), and stored as
    :func:`store` stores them joined once the last has passed: the document is never held whole
    (a big trace's would be held with its compact form and a copy by ``store``). Never
    raises for I/O: a piece that cannot be written ends the storing, not the passing on; an entry
    whose pieces did not all pass is not stored."""
    entry = _Entry(Path(root), trace_id, options, source)
    try:
        for piece in parts:
            entry.write(piece)
            yield piece
        entry.commit()
    finally:
        entry.abort()


class _Entry:
    """One entry being written: its check line first, then the document's pieces, to a temporary
    file renamed into place by :meth:`commit` (the :data:`KEEP` newest entries are kept)."""

    def __init__(self, base: Path, trace_id: str, options: dict[str, Any], source: str | None) -> None:
        self.folder = base / RESULTS_TABLE / f"trace_id={trace_id}"
        self.tmp = self.folder / f".tmp-{uuid.uuid4().hex[:8]}"
        self.key = result_key(base, trace_id, options)
        self.file: BinaryIO | None = None
        self.size, self.digest = 0, hashlib.blake2b(digest_size=16)
        if self.key is None:
            return
        check = {"key": self.key, "source": source or None, "sidecar": _sidecar_state(source or None)}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.file = self.tmp.open("wb")
        except OSError:
            return
        self._put(json.dumps(check).encode() + b"\n")

    def write(self, piece: bytes) -> None:
        """A piece of the document."""
        self.size += len(piece)
        self.digest.update(piece)
        self._put(piece)

    def _put(self, data: bytes) -> None:
        if self.file is None:
            return
        try:
            self.file.write(data)
        except OSError:
            self.abort()

    def commit(self) -> bool:
        self._put(json.dumps({"size": self.size, "blake2b": self.digest.hexdigest()}).encode())
        if self.file is None:
            return False
        try:
            self.file.close()
            self.file = None
            os.replace(self.tmp, self.folder / f"{self.key}.json")
            entries = sorted(self.folder.glob("*.json"), key=lambda f: f.stat().st_mtime_ns, reverse=True)
            for old in entries[KEEP:]:
                old.unlink(missing_ok=True)
        except OSError:
            self.abort()
            return False
        return True

    def abort(self) -> None:
        """Drop a partly written entry (nothing once committed)."""
        if self.file is not None:
            with suppress(OSError):
                self.file.close()
            self.file = None
        with suppress(OSError):
            self.tmp.unlink(missing_ok=True)
