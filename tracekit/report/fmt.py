"""Value formatting shared by the text, Markdown and HTML renderers.

A column's unit comes from its name (the project convention): ``*_ns`` is time in ns,
``*flops_per_s`` FLOP/s, ``*bytes_per_s`` B/s, ``flops`` FLOP, ``bytes`` B, ``intensity``
FLOP/B, ``coverage`` / ``*fraction`` / ``*_pct`` shares. Unknown numbers print with 4
significant digits. Escaping for Markdown and HTML lives here too, so every renderer escapes
the same way.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(v: float, unit: str) -> str:
    """1.23e12, "FLOP/s" → "1.23 TFLOP/s"."""
    a = abs(v)
    for scale, prefix in _SI:
        if a >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def duration(ns: float) -> str:
    """Nanoseconds → the most readable unit ("1.23 ms", "45.6 µs", "2.00 s")."""
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.0f} ns"


def value(col: str, v: Any) -> str:
    """Format one cell by its column's unit (see module doc). None / NaN → "–"."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "–" if math.isnan(v) else ("∞" if v > 0 else "-∞")
    if not isinstance(v, (int, float)):
        return str(v)
    c = col.lower().rsplit(".", 1)[-1] if "." in col else col.lower()
    full = col.lower()
    if c.endswith("_ns") or full.endswith("_ns"):
        return duration(float(v))
    if c.endswith("_ms"):
        return duration(float(v) * 1e6)
    if c.endswith("_us"):
        return duration(float(v) * 1e3)
    if "flops_per_s" in c:
        return si(float(v), "FLOP/s")
    if "bytes_per_s" in c or c.endswith("bandwidth"):
        return si(float(v), "B/s")
    if c.endswith("tokens_per_s"):
        return f"{v:.4g} tok/s"
    if c in ("coverage", "busy_fraction", "peak_fraction", "share", "busy_ratio") or c.endswith(("_fraction", "_share")) or c.startswith("frac_"):
        return f"{100 * float(v):.1f} %"
    if c.endswith("_pct") or c.endswith("percent"):
        return f"{float(v):.1f} %"
    if c == "intensity" or c.endswith("_intensity") or c == "ridge":
        return f"{v:.3g} FLOP/B"
    if c.endswith("flops") or c == "flop":
        return si(float(v), "FLOP")
    if c.endswith("bytes"):
        return si(float(v), "B")
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.4g}"


def label(col: str) -> str:
    """Column name → a short header ("achieved_flops_per_s" → "achieved FLOP/s")."""
    named = {"frac_peak_flops": "of peak FLOP/s", "frac_peak_bytes": "of peak B/s", "busy_ratio": "busy %"}
    if col in named:
        return named[col]
    c = col.replace(".", " ").replace("_per_s", "/s").replace("_ns", "").replace("_ms", "")
    c = c.replace("flops", "FLOP").replace("_", " ")
    return c.strip()


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_escape(text: Any) -> str:
    """Escape a trace-provided string for a GitHub Markdown table cell or list item.

    HTML-escapes ``<>&"`` (GitHub renders raw HTML), backslash-escapes Markdown punctuation,
    escapes table pipes and flattens newlines, so a name can neither close a cell nor inject markup.
    """
    s = html.escape(str(text), quote=True)
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return s.replace("\r", " ").replace("\n", " ")


def html_escape(text: Any) -> str:
    """Escape for HTML text and attribute values."""
    return html.escape(str(text), quote=True)
