"""The JSON documents the CLI prints (``analyze --format json``, ``report --format json``): indented
by msgspec (C), and safe on a terminal while staying valid JSON.

JSON already escapes C0 controls (``\\u001b``), but DEL, the C1 controls and the Unicode
bidi/direction marks pass through raw; :func:`document` writes them as ``\\uXXXX`` escapes too —
the same code point once parsed, so nothing is lost, and nothing can retitle a terminal or
reorder what it shows. (``cli.term.clean``'s ``\\x..`` form would be an invalid JSON escape.)
Nothing here imports polars: a stored analysis result prints through this module alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from tracekit.conventions import TERMINAL_UNSAFE

# Searched in the UTF-8 bytes (no decoding of a document of many MB): one alternative per
# character of conventions.TERMINAL_UNSAFE (44 of them). The pre-check is one pattern per lead
# byte (lead + the rest of its characters): the regex engine finds the literal lead fast, so a
# document with many harmless characters of the same lead (µ, 0xC2 0xB5) is checked several times
# faster than by running the 44-way alternation over all of it.
_CHARS = [chr(c).encode() for lo, hi in TERMINAL_UNSAFE for c in range(lo, hi + 1)]
_UNSAFE = re.compile(b"|".join(re.escape(b) for b in _CHARS))
_BY_LEAD: dict[bytes, list[bytes]] = {}
for _c in _CHARS:
    _BY_LEAD.setdefault(_c[:1], []).append(_c[1:])
_PRECHECK = [
    (lead, re.compile(re.escape(lead) + b"(?:" + b"|".join(re.escape(r) for r in rest) + b")"))
    for lead, rest in sorted(_BY_LEAD.items())
]


def _escape(m: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(m.group(0).decode("utf-8"))


def safe(data: bytes) -> bytes:
    """``data`` (UTF-8 JSON) with terminal-unsafe characters written as JSON ``\\uXXXX`` escapes.
    Only JSON strings can hold them, where the escape means the same character."""
    if _unsafe_in(data):
        return _UNSAFE.sub(_escape, data)
    return data


def _unsafe_in(data: bytes) -> bool:
    """Whether ``data`` holds a terminal-unsafe character: a lead byte absent from the data (all
    of them in an ASCII document) is ruled out by a byte search (``in``: memchr, far faster than
    any pattern), the others by their pattern."""
    return any(lead in data and p.search(data) is not None for lead, p in _PRECHECK)


def document(compact: bytes) -> bytes:
    """The printed form of a JSON document given as compact UTF-8 JSON: indented by 2, terminal
    safe (:func:`safe`), one trailing newline. Non-ASCII text stays UTF-8."""
    import msgspec  # lazy: safe() alone (summary/diff/whatif JSON files) needs no msgspec

    return safe(msgspec.json.format(compact, indent=2)) + b"\n"


def document_parts(skeleton: bytes, placeholder: bytes, arrays: Iterable[bytes]) -> Iterator[bytes]:
    """:func:`document` of a compact document given in parts, printed piece by piece: the
    ``skeleton`` holds, in place of one array, the JSON string ``placeholder`` (its compact JSON,
    quotes included, found once and only there); ``arrays`` are compact JSON arrays whose
    elements, in order, are that array's. The pieces joined are the bytes of :func:`document` of
    the whole document (tracekit/analysis/result.py ``to_json_parts``), and no piece holds more
    than one of ``arrays`` (a big trace's regions are printed piece by piece, never whole). JSON
    strings hold no raw newline, so every newline of an indented array is between two of its
    tokens, and formatting copies the tokens (strings, numbers) as they are: an array is printed
    at its depth in the document by formatting it as the value of as many nested one-key objects
    and taking its elements' lines out of that text, and it holds a terminal-unsafe character
    only if its compact JSON does."""
    import msgspec  # lazy: safe() alone (summary/diff/whatif JSON files) needs no msgspec

    text = msgspec.json.format(skeleton, indent=2)
    at = text.index(placeholder)
    line = text.rfind(b"\n", 0, at) + 1
    ind = b" " * (len(text[line:at]) - len(text[line:at].lstrip(b" ")))
    wrap, unwrap = b'{"r":' * (len(ind) // 2), b"}" * (len(ind) // 2)
    yield safe(text[:at])
    first = True
    for arr in arrays:
        if arr == b"[]":
            continue
        f = msgspec.json.format(wrap + arr + unwrap, indent=2)
        # f: the wrapping keys, "[\n", the elements (lines indented for this depth), "\n" + ind + "]", "}"s
        body = f[f.index(b"[") + 2 : f.rindex(b"]") - len(ind) - 1]
        del f
        yield b"[\n" if first else b",\n"
        yield safe(body) if _unsafe_in(arr) else body
        first = False
    yield safe((b"[]" if first else b"\n" + ind + b"]") + text[at + len(placeholder) :]) + b"\n"
