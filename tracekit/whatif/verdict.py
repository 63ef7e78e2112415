"""The what-if's conclusion, read off its own table (docs/whatif.md, "The verdict").

The simulation's percentiles decide, never the mechanism alone: an earlier version said
"disaggregation pays" because the mean KV transfer was shorter than the mean interference removed,
while its own table showed worse TTFT and E2E (issue 27). Now the verdict compares the numbers the
table prints: with an SLO, goodput decides; without one, the p50 and p99 of TTFT, TPOT and E2E,
each counted better or worse when the two differ by more than :data:`TIE` of the colocated value.
"""

from __future__ import annotations

from typing import Any

from tracekit.numbers import plain

TIE = 0.01  # relative difference below which two simulated figures count as equal
METRICS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2el_ms", "E2E"))


def verdict(co: dict[str, Any], dis: dict[str, Any]) -> dict[str, Any]:
    """``outcome`` (``pays`` | ``does not pay`` | ``trade-off`` | ``no difference``), the ``better``
    and ``worse`` figures of the disaggregated side (name, disaggregated, colocated) and the
    sentence. ``co`` / ``dis``: :func:`tracekit.whatif.summarise` of the two replays."""
    gc, gd = co.get("goodput_req_per_s"), dis.get("goodput_req_per_s")
    if gc is not None and gd is not None:
        rows = [("goodput req/s", gd, gc, gd > gc * (1 + TIE), gd < gc * (1 - TIE))]
    else:
        rows = []
        for key, label in METRICS:
            for q in ("p50", "p99"):
                a, b = dis[key][q], co[key][q]
                if a is None or b is None:
                    continue
                tol = TIE * abs(b)
                rows.append((f"{label} {q}", a, b, a < b - tol, a > b + tol))
    better = [(n, a, b) for n, a, b, up, _ in rows if up]
    worse = [(n, a, b) for n, a, b, _, down in rows if down]

    def says(items: list[tuple[str, float, float]]) -> str:
        return ", ".join(
            f"{n} {plain(a)} vs {plain(b)} ms" if "req/s" not in n else f"{n} {plain(a)} vs {plain(b)}"
            for n, a, b in items
        )

    if better and not worse:
        outcome, text = "pays", f"disaggregation pays: better {says(better)} (disaggregated vs colocated)"
    elif worse and not better:
        outcome, text = "does not pay", f"disaggregation does not pay: worse {says(worse)} (disaggregated vs colocated)"
    elif better and worse:
        outcome = "trade-off"
        text = f"disaggregation is a trade-off: better {says(better)}; worse {says(worse)} (disaggregated vs colocated)"
    else:
        outcome, text = "no difference", f"disaggregation makes no difference: every figure within {TIE * 100:.0f} %"
    if rows and rows[0][0] == "goodput req/s":
        text += " under the SLO"
    return {"outcome": outcome, "better": better, "worse": worse, "text": text}
