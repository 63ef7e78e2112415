"""A stored analysis result (tracekit/tables/results.py) is checked and printed in pieces, never
held whole: ``lookup`` reads the entry once to check it (form, terminal-unsafe bytes, the trailer's
size and digest) and hands back a ``Stored`` that reads it again as it is printed, each piece
checked again for terminal-unsafe bytes before it is passed on; a JSON hit has no size cap, the
text screen (which decodes the document whole) recomputes one over ``RESULT_MAX_BYTES``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tracekit.commands import analyze as analyze_service
from tracekit.commands import analyze_compute
from tracekit.commands.analyze import AnalyzeRequest, analyze
from tracekit.commands.ingest import IngestRequest, ingest
from tracekit.tables import results
from tracekit.tables.results import StoredChanged, analysis_options, lookup

NCCL = "kineto/hta/nccl_parser_config/nccl_data.json.gz"
PIECE = 10_000


def _stored(shared_traces: Path, tmp_path: Path) -> tuple[Path, bytes, Path]:
    """(dataset, the JSON document its first analysis printed and stored, the entry)."""
    ds = tmp_path / "ds"
    assert ingest(IngestRequest((str(shared_traces / NCCL),), ds)).error is None
    body = analyze(AnalyzeRequest(str(ds), fmt="json")).body
    doc = b"".join(body) if not isinstance(body, (str, bytes)) else body if isinstance(body, bytes) else body.encode()
    (entry,) = (ds / results.RESULTS_TABLE).glob("trace_id=*/*.json")
    return ds, doc, entry


def _hit(ds: Path) -> results.Stored | None:
    return lookup(ds, None, analysis_options(None, (), None, None))


def test_a_stored_document_is_checked_and_printed_in_pieces(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "_PIECE", PIECE)
    ds, doc, entry = _stored(shared_traces, tmp_path)
    stored = _hit(ds)
    assert stored is not None and len(stored) == len(doc)
    pieces = list(stored.pieces())
    # nccl_data's document, ≈ 184 KB (183,807 bytes from the file; here its source path is the
    # dataset's): 19 pieces, 18 of 10,000 bytes and the rest, the same document
    assert 180_000 < len(doc) < 190_000
    assert len(pieces) == 19 and [len(p) for p in pieces[:-1]] == [PIECE] * 18
    assert b"".join(pieces) == doc
    # a bidi mark (E2 80 AE) cut by the pieces' border, the trailer recomputed: a miss
    head, _, _ = entry.read_bytes().partition(b"\n")
    at = 2 * PIECE - 2
    evil = doc[:at] + b"\xe2\x80\xae" + doc[at + 3 :]
    trailer = {"size": len(evil), "blake2b": hashlib.blake2b(evil, digest_size=16).hexdigest()}
    entry.write_bytes(head + b"\n" + evil + json.dumps(trailer).encode())
    assert _hit(ds) is None
    assert results._raw_controls(evil[at : at + 3]) and not results._raw_controls(evil[: 2 * PIECE])


def test_an_entry_changed_while_printed_stops_the_printing(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each piece is checked again as it is printed: an escape written into the second piece in
    # place after the check (or while the first was printed) ends the printing after the first.
    monkeypatch.setattr(results, "_PIECE", PIECE)
    ds, doc, entry = _stored(shared_traces, tmp_path)
    start = entry.read_bytes().index(b"\n") + 1

    def poke() -> None:
        with open(entry, "r+b") as fh:  # one byte of the second piece, in place
            fh.seek(start + PIECE + 10)
            fh.write(b"\x1b")

    for when in ("after the check", "while printed"):
        stored = _hit(ds)
        assert stored is not None
        if when == "after the check":
            poke()
        got: list[bytes] = []
        with pytest.raises(StoredChanged, match="changed while it was printed"):
            for piece in stored.pieces():
                got.append(piece)
                poke()
        assert got == [doc[:PIECE]]
        assert _hit(ds) is None  # checked again: a miss
        entry.unlink()  # computed again and stored as printed, for the next round
        assert b"".join(analyze(AnalyzeRequest(str(ds), fmt="json")).body) == doc  # type: ignore[arg-type]


def test_the_text_screen_recomputes_a_document_over_its_cap(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds, doc, _ = _stored(shared_traces, tmp_path)
    text = analyze(AnalyzeRequest(str(ds), reuse=False)).body
    computed: list[str] = []
    real = analyze_compute.compute

    def spy(*args: object, **kw: object) -> object:
        computed.append("x")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(analyze_compute, "compute", spy)
    assert analyze(AnalyzeRequest(str(ds))).body == text and computed == []  # from the stored document
    monkeypatch.setattr(analyze_service, "RESULT_MAX_BYTES", len(doc) - 1)
    assert analyze(AnalyzeRequest(str(ds))).body == text and computed == ["x"]  # over the cap: computed
    # JSON has no cap: printed from the entry in pieces
    body = analyze(AnalyzeRequest(str(ds), fmt="json")).body
    assert not isinstance(body, (str, bytes)) and b"".join(body) == doc and computed == ["x"]
