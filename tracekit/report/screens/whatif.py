"""Text of ``tracekit whatif`` (docs/whatif.md): assumptions first, then the answers."""

from __future__ import annotations

from typing import Any

from tracekit.report import fmt


def _ms(v: Any) -> str:
    """A duration given in ms: in ms from 0.01 to 10,000 ("2,300 ms"), else in the unit that reads
    ("61.6 s", not "61,638 ms"; "477 ns", not "0.000477 ms")."""
    if v is None:
        return fmt.DASH
    return f"{fmt.figure(v)} ms" if 0.01 <= abs(float(v)) < 10_000 else fmt.duration(float(v) * 1e6)


def _quantiles(name: str, width: int, m: dict[str, Any], qs: tuple[str, ...], cell: int = 10) -> str:
    """One table row: ``name`` padded to ``width``, then TTFT, TPOT and E2E at each of ``qs``."""
    return f"{name:{width}}" + "".join(
        f"{fmt.figure(m[k][q]):>{cell}}" for k in ("ttft_ms", "tpot_ms", "e2el_ms") for q in qs
    )


def _interval_row(name: str, width: int, iv: dict[str, Any], cell: int) -> str:
    """The interval of each percentile, ``lo–hi``, under the row it belongs to."""
    return f"{name:{width}}" + "".join(
        f"{(fmt.figure(v[0]) + '–' + fmt.figure(v[1])) if v else fmt.DASH:>{cell}}"
        for k in ("ttft_ms", "tpot_ms", "e2el_ms")
        for v in (iv.get(k, {}).get(q) for q in ("p50", "p90", "p99"))
    )


def _sensitivity(doc: dict[str, Any]) -> list[str]:
    """The sensitivity lines (E2E split into prefill and decode), or why it was not computed."""
    s = doc.get("sensitivity")
    if not s:
        lacks = doc.get("sensitivity_lacks")
        return ["", "Sensitivity: not computed; it lacks " + "; ".join(lacks)] if lacks else []
    basis = (
        f"from measured step times: {fmt.figure(s['decode_steps'])} decode steps × TPOT {_ms(s['tpot_ms'])}"
        if "decode_steps" in s
        else f"mean over {s['requests']} request{'s' if s['requests'] != 1 else ''}"
    )
    return [
        "",
        f"Sensitivity (E2E ≈ prefill + decode steps × TPOT, {basis})",
        f"E2E {_ms(s['e2el_ms'])} = prefill {_ms(s['prefill_ms'])} + decode {_ms(s['decode_ms'])}",
        f"halving prefill saves {_ms(s['save_half_prefill_ms'])} per request; "
        f"halving TPOT saves {_ms(s['save_half_tpot_ms'])} per request",
    ]


def _compare(c: dict[str, Any]) -> list[str]:
    """The colocated vs disaggregated table, its goodput, overheads, mechanism and verdict."""
    w = c["workers"]
    out = [
        "",
        f"Colocated ({w['colocated']} workers) vs disaggregated ({w['prefill']} prefill + {w['decode']} decode), "
        "the traced arrivals replayed",
        f"{'':16}{'TTFT p50':>10}{'TTFT p99':>10}{'TPOT p50':>10}{'TPOT p99':>10}{'E2E p50':>10}{'E2E p99':>10}  (ms)",
    ]
    out += [_quantiles(name, 16, c[name], ("p50", "p99")) for name in ("colocated", "disaggregated")]
    for name in ("colocated", "disaggregated"):
        m = c[name]
        if m.get("goodput_fraction") is not None:
            out.append(
                f"goodput {name}: {fmt.figure(m['goodput_req_per_s'])} req/s, "
                f"{m['goodput_fraction'] * 100:.0f} % of requests meet the SLO"
            )
    out.append(
        f"interference per request (colocated replay): {_ms(c['colocated']['mean_interference_ms'])}; "
        "KV transfer per request (disaggregated, incl. waiting for the link): "
        f"{_ms(c['disaggregated']['mean_transfer_ms'])}"
    )
    out.append(f"mechanism: {c['mechanism']}")
    out.append(f"verdict (from the table above): {c['verdict']}")
    rep = c.get("outcome_in_noisy_replays")
    if rep:
        out.append(
            f"the same outcome in {rep['same']} of {rep['of']} replays that draw the traced steps' noise and drift"
        )
    return out


def _load(ld: dict[str, Any]) -> list[str]:
    """Another arrival rate: predicted, replayed and measured quantiles, and the model's error."""
    out = ["", f"Another load: --arrival {ld['arrival']} on {ld['workers']} worker (the traced setup)"]
    out.append(f"arrivals: {ld['arrivals']}")
    cell = 12
    hdr = f"{'':28}" + "".join(f"{f'{m} {q}':>{cell}}" for m in ("TTFT", "TPOT", "E2E") for q in ("p50", "p90", "p99"))
    out.append(hdr + "  (ms)")
    rows = (
        (f"predicted at {ld['arrival']}", ld["predicted"]),
        ("replay of the traced load", ld["replay_of_traced"]),
        ("measured (traced load)", ld["measured_traced"]),
    )
    for name, m in rows:
        if m:
            out.append(_quantiles(name, 28, m, ("p50", "p90", "p99"), cell))
            if m.get("interval"):
                out.append(_interval_row("  interval (10–90 %)", 28, m["interval"], cell))
    if ld["predicted"].get("replicates"):
        out.append(
            f"each predicted figure is the median of {ld['predicted']['replicates']} replays whose steps draw "
            "the traced steps' noise (measured / fitted), each replay at the level of one stretch of the "
            "traced run (its slow drift); the interval is their 10th–90th percentile. It does not hold a "
            "host whose speed differs from the traced run's"
        )
    err = ld.get("error_at_traced_load") or {}
    if any(v is not None for v in err.values()):
        out.append(
            "the model's error at the traced load (replay vs measured, p50): "
            + ", ".join(
                f"{m} {err[k] * 100:+.0f} %"
                for k, m in (("ttft_p50", "TTFT"), ("tpot_p50", "TPOT"), ("e2el_p50", "E2E"))
                if err.get(k) is not None
            )
        )
    return out


def render(doc: dict[str, Any]) -> str:
    """The whole screen: title, diagnostic, assumptions, sensitivity, replay, comparison, load, notes."""
    out: list[str] = ["tracekit whatif" + (f": {doc['source']}" if doc.get("source") else "")]
    if doc.get("diagnostic"):
        out.append(f"*** {doc['diagnostic']} ***")
    if doc.get("assumptions"):
        out += ["", "Assumptions (every input and where it comes from)"]
        out += [f"- {k}: {v}" for k, v in doc["assumptions"].items()]
    out += _sensitivity(doc)
    if doc.get("replay"):
        out += ["", "Replay: not run; it lacks " + "; ".join(doc["replay"]["lacks"])]
    if doc.get("compare_lacks"):
        out += ["", f"Colocated vs disaggregated: not run; it lacks {doc['compare_lacks']}"]
    if doc.get("compare"):
        out += _compare(doc["compare"])
    if doc.get("load"):
        out += _load(doc["load"])
    out += [f"note: {note}" for note in doc.get("notes") or []]
    return "\n".join(out) + "\n"
