"""The seed's question: what halving prefill or TPOT saves (docs/whatif.md, "Sensitivity").

Per request E2E ≈ prefill + decode steps × TPOT, so halving prefill saves prefill / 2 and halving
TPOT saves decode steps × TPOT / 2. Three ways to get the three numbers, each printed with its
source: per traced request from the replay's inputs (:func:`traced_sensitivity`); from the
trace's measured step times (:func:`measured_sensitivity`, any trace with a prefill and a decode
step); or by hand (options), which also fills what a trace lacks.
"""

from __future__ import annotations

from typing import Any

from tracekit.errors import UsageError
from tracekit.numbers import count, plain
from tracekit.whatif.sim import Policy, StepCost


def sensitivity(prefill_ms: list[float], decode_steps: list[int], tpot_ms: list[float]) -> dict[str, Any]:
    """Mean over requests of E2E = prefill + decode steps × TPOT, and what halving each saves.

    The seed's example: ``sensitivity([300], [100], [20])`` → E2E 2,300 ms; halving prefill saves
    150 ms, halving TPOT saves 1,000 ms."""
    if not prefill_ms or not (len(prefill_ms) == len(decode_steps) == len(tpot_ms)):
        raise UsageError("sensitivity needs one prefill time, decode-step count and TPOT per request")
    n = len(prefill_ms)
    dec = [s * t for s, t in zip(decode_steps, tpot_ms)]
    return {
        "requests": n,
        "e2el_ms": sum(p + d for p, d in zip(prefill_ms, dec)) / n,
        "prefill_ms": sum(prefill_ms) / n,
        "decode_ms": sum(dec) / n,
        "save_half_prefill_ms": sum(prefill_ms) / n / 2,
        "save_half_tpot_ms": sum(dec) / n / 2,
    }


def chunked_prefill_ms(prompt: int, cost: StepCost, pol: Policy) -> float:
    """A prompt prefilled alone the way the runner does it: in chunks of at most
    min(chunk, token budget) tokens, each a step of the step-cost model (its intercept and the
    loop's gap paid once per chunk)."""
    size = max(1, min(pol.chunk, pol.token_budget))
    full, rest = divmod(prompt, size)
    return full * cost.ms(size, 0, 0) + (cost.ms(rest, 0, 0) if rest else 0.0)


def traced_sensitivity(result: Any, requests: list[Any], cost: StepCost, pol: Policy) -> dict[str, Any]:
    """For the traced length distribution: per request, prefill = the step-cost model's prefill of
    its prompt alone, costed as the runner's chunks (:func:`chunked_prefill_ms`); decode steps =
    output tokens − 1 (the first token comes from the prefill); TPOT = its TPOT measured in the trace."""
    tpot: dict[int, float] = {}
    req = getattr(result, "requests", None)
    if req is not None and req.height:
        for r in req.filter(req["source"] == "trace").to_dicts():
            if r.get("tpot_ms") is not None:
                tpot[int(r["request"])] = float(r["tpot_ms"])
    rs = [r for r in requests if r.output > 1 and r.id in tpot]
    if not rs:
        return {}
    out = sensitivity(
        [chunked_prefill_ms(r.prompt, cost, pol) for r in rs], [r.output - 1 for r in rs], [tpot[r.id] for r in rs]
    )
    out["mean_prompt_tokens"] = sum(r.prompt for r in rs) / len(rs)
    out["mean_output_tokens"] = sum(r.output for r in rs) / len(rs)
    return out


def _latency_p50(results: list[tuple[str | None, Any]], phase: str, metric: str) -> tuple[float | None, int, str]:
    """The first result's trace p50 of (phase, metric): value, count, and " in TRACE" when several."""
    for name, result in results:
        lat = getattr(result, "latency", None)
        if lat is None or lat.height == 0:
            continue
        rows = lat.filter((lat["phase"] == phase) & (lat["metric"] == metric) & (lat["source"] == "trace")).to_dicts()
        if rows and rows[0].get("p50") is not None:
            where = f" ({name})" if len(results) > 1 and name else ""
            return float(rows[0]["p50"]), int(rows[0]["count"] or 0), where
    return None, 0, ""


BLOCKED_SHARE = 0.5  # a phase whose window is this much a blocking host call measures the wait, not the work


def _blocked(results: list[tuple[str | None, Any]], phase: str, metric: str) -> str:
    """A warning when ``phase``'s window, in the trace the figure came from (the first with that
    latency ``metric``, as :func:`_latency_p50` takes it), is mostly a blocking call (a synchronous
    copy, a stream synchronize): the step time then measures the host's wait; "" otherwise."""
    for _, result in results:
        lat, ph = getattr(result, "latency", None), getattr(result, "phases", None)
        if (
            lat is None
            or lat.height == 0
            or lat.filter((lat["phase"] == phase) & (lat["metric"] == metric)).height == 0
        ):
            continue
        if ph is None or ph.height == 0 or "idle_blocking_ns" not in ph.columns:
            return ""
        rows = ph.filter(ph["phase"] == phase).to_dicts()
        if rows and rows[0].get("span_ns") and rows[0].get("idle_blocking_ns"):
            share = rows[0]["idle_blocking_ns"] / rows[0]["span_ns"]
            if share >= BLOCKED_SHARE:
                return (
                    f" — WARNING: {share * 100:.0f} % of the {phase} steps' time is a blocking host call "
                    f"({rows[0].get('idle_top') or 'blocking'}): this figure measures that wait, not the "
                    "step's work; give --tpot-ms from a trace without it"
                )
        return ""
    return ""


def measured_sensitivity(
    results: list[tuple[str | None, Any]],
    prefill_ms: float | None = None,
    tpot_ms: float | None = None,
    decode_steps: int | None = None,
) -> tuple[dict[str, Any] | None, dict[str, str], list[str]]:
    """From the traces' measured step times (steady state: cold-start steps are left out of the
    latency table): prefill = p50 prefill step time; TPOT = the trace's TPOT p50, else the p50
    decode step time (each decode step gives every sequence one token); decode steps per request
    = mean output tokens − 1 of the trace's requests. ``results``: (trace name, analysis result),
    each input taken from the first that has it (a prefill trace and a decode trace of one model
    answer together). A hand value (option) replaces the traces'. Returns (the sensitivity or None,
    each input's source, what is lacking — one item per missing input, naming the option that
    supplies it)."""
    src: dict[str, str] = {}
    lacks: list[str] = []
    some = "the traces" if len(results) > 1 else "the trace"
    p = prefill_ms
    if p is not None:
        src["prefill"] = f"{plain(p)} ms (option --prefill-ms)"
    else:
        p, n, where = _latency_p50(results, "prefill", "step_time")
        if p is not None:
            src["prefill"] = f"{plain(p)} ms: p50 of {count(n, 'prefill step')} measured in the trace{where}"
        else:
            lacks.append(f"a prefill step time (no prefill step in {some}: give --prefill-ms)")
    t = tpot_ms
    if t is not None:
        src["tpot"] = f"{plain(t)} ms (option --tpot-ms)"
    else:
        t, n, where = _latency_p50(results, "decode", "tpot")
        what, noun = "TPOT p50 of {} measured in the trace{}", "traced request"
        if t is None or n == 0:
            t, n, where = _latency_p50(results, "decode", "step_time")
            what = "p50 of {} measured in the trace{} (one token per sequence per step)"
            noun = "decode step"
        if t is not None:
            metric = "tpot" if noun == "traced request" else "step_time"
            src["tpot"] = f"{plain(t)} ms: " + what.format(count(n, noun), where) + _blocked(results, "decode", metric)
        else:
            lacks.append(f"a decode step time (no decode step in {some}: give --tpot-ms)")
    k: float | None = decode_steps
    if k is not None:
        src["decode steps"] = f"{decode_steps} (option --decode-steps)"
    else:
        for name, result in results:
            req = getattr(result, "requests", None)
            tr = req.filter(req["source"] == "trace") if req is not None and req.height else None
            outs = tr["output_tokens"].drop_nulls() if tr is not None else None
            if outs is not None and outs.len():
                k = float(outs.mean()) - 1  # type: ignore[operator]
                where = f" ({name})" if len(results) > 1 and name else ""
                src["decode steps"] = (
                    f"{plain(k)}: mean output tokens − 1 of {count(outs.len(), 'traced request')}{where} "
                    "(the first token comes from the prefill)"
                )
                break
        else:
            lacks.append(f"decode steps per request (no request in {some} says its output length: give --decode-steps)")
    if lacks or p is None or t is None or k is None:
        return None, src, lacks
    out = sensitivity([p], [1], [t * k])  # k may be fractional (a mean): decode = k × TPOT
    out["decode_steps"] = k
    out["tpot_ms"] = t
    return out, src, lacks
