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

from tracekit.conventions import TERMINAL_UNSAFE

# Searched in the UTF-8 bytes (no decoding of a document of many MB): one alternative per
# character of conventions.TERMINAL_UNSAFE (44 of them). The pre-check is one pattern per lead
# byte (lead + the rest of its characters): the regex engine finds the literal lead fast, so a
# document with many harmless characters of the same lead (µ, 0xC2 0xB5) is checked in ~0.1 s
# per 100 MB instead of running the 44-way alternation over all of it (~0.6 s).
_CHARS = [chr(c).encode() for lo, hi in TERMINAL_UNSAFE for c in range(lo, hi + 1)]
_UNSAFE = re.compile(b"|".join(re.escape(b) for b in _CHARS))
_BY_LEAD: dict[bytes, list[bytes]] = {}
for _c in _CHARS:
    _BY_LEAD.setdefault(_c[:1], []).append(_c[1:])
_PRECHECK = [
    re.compile(re.escape(lead) + b"(?:" + b"|".join(re.escape(r) for r in rest) + b")")
    for lead, rest in sorted(_BY_LEAD.items())
]


def _escape(m: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(m.group(0).decode("utf-8"))


def safe(data: bytes) -> bytes:
    """``data`` (UTF-8 JSON) with terminal-unsafe characters written as JSON ``\\uXXXX`` escapes.
    Only JSON strings can hold them, where the escape means the same character."""
    if any(p.search(data) for p in _PRECHECK):
        return _UNSAFE.sub(_escape, data)
    return data


def document(compact: bytes) -> bytes:
    """The printed form of a JSON document given as compact UTF-8 JSON: indented by 2, terminal
    safe (:func:`safe`), one trailing newline. Non-ASCII text stays UTF-8."""
    import msgspec

    return safe(msgspec.json.format(compact, indent=2)) + b"\n"
