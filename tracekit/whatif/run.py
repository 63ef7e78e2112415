"""The ``tracekit whatif`` document: from an analysis result (the command loads and analyses the
trace), gather the inputs, answer, and return one JSON-able document that the text renderer prints."""

from __future__ import annotations

from typing import Any

from tracekit.errors import AnalysisError, UsageError
from tracekit.hardware.links import link
from tracekit.numbers import count, plain
from tracekit.whatif import Inputs, compare, inputs, replay_lacks
from tracekit.whatif.load import Arrival, arrival_times, errors, measured, predict
from tracekit.whatif.sensitivity import measured_sensitivity, sensitivity, traced_sensitivity
from tracekit.analysis.serving.latency import Slo

Hand = tuple[float | None, float | None, int | None]
NOISY_SHARE = 0.1  # host-noise outliers holding more of the step time than this: said in a note


def run_whatif(
    trace: str | None,
    result: Any = None,
    hand: Hand | None = None,
    prefill_workers: int = 1,
    decode_workers: int = 1,
    link_key: str = "nvlink4",
    link_gbps: float | None = None,
    link_efficiency: float = 1.0,
    link_latency_us: float = 0.0,
    kv_bytes_per_token: float | None = None,
    slo: str | None = None,
    arrival: str | None = None,
    seed: int | None = None,
    others: list[tuple[str, Any]] | None = None,
) -> dict[str, Any]:
    """The whatif document for ``result`` (the analysis of ``trace``; None with hand input only).
    ``hand``: (prefill ms, TPOT ms, decode steps), any of them None; with a trace each given value
    replaces the trace's. ``others``: more (trace, result) pairs, e.g. a decode trace beside a
    prefill trace: the sensitivity takes each input from the first trace that has it; the replay
    reads one traced run, so it does not run then. Raises AnalysisError naming what is missing when
    nothing can be answered, or when ``arrival`` is asked for and the replay cannot run."""

    slo_v = Slo.parse(slo)
    if not 0 < link_efficiency <= 1:
        raise UsageError("--link-efficiency must be in (0, 1]")
    arr = Arrival.parse(arrival) if arrival is not None else None
    entry = link_entry(link_key, link_gbps)
    p, t, n = hand or (None, None, None)
    if any(v is not None and v < 0 for v in (p, t, n)):
        raise UsageError("--prefill-ms, --tpot-ms and --decode-steps must be ≥ 0")
    doc = _hand_doc(trace, others, p, t, n)
    if result is None:
        if "sensitivity" not in doc:
            raise UsageError("give a TRACE_OR_DATASET, or all of --prefill-ms, --tpot-ms and --decode-steps")
        return doc
    lacks = (
        [f"one traced run ({len(others) + 1} traces given: the replay reads one)"] if others else replay_lacks(result)
    )
    inp = None if lacks else inputs(result, kv_bytes_per_token)
    _traced_notes(doc, result, inp)
    if "sensitivity" not in doc:
        traced_or_measured(doc, [(trace, result), *(others or [])], inp, (p, t, n), hand is None)
    if inp is None:
        return _without_replay(doc, lacks, arr)
    doc["assumptions"]["link"] = (
        f"{entry['name']}: {entry['gbps']} GB/s per direction × efficiency {link_efficiency} "
        f"+ {link_latency_us} µs per transfer; source: {entry['source']}"
    )
    doc["assumptions"]["colocated"] = (
        f"{prefill_workers + decode_workers} workers doing both phases (same worker count)"
    )
    slo_d = slo_v.as_dict() if slo_v is not None else None
    if slo_d is not None:
        doc["assumptions"]["slo"] = str(slo_d)
    if inp.kv_bytes_per_token is None:  # the other answers stand without it
        doc["compare_lacks"] = (
            f"KV bytes per token ({doc['assumptions'].get('kv_bytes_per_token')}): pass --kv-bytes-per-token"
        )
    else:
        bw = entry["gbps"] * 1e9 * link_efficiency
        doc["compare"] = compare(inp, prefill_workers, decode_workers, bw, link_latency_us / 1e3, slo_d)
    if arr is not None:
        doc["load"] = another_load(result, inp, arr, seed, slo_d)
        if doc["load"].get("extrapolates"):
            doc["notes"].append(doc["load"]["extrapolates"])
    return doc


def _hand_doc(
    trace: str | None, others: list[tuple[str, Any]] | None, p: float | None, t: float | None, n: int | None
) -> dict[str, Any]:
    """The document's start: its source, and the sensitivity of the hand input when it is whole."""
    doc: dict[str, Any] = {
        "source": ", ".join([str(trace), *[o[0] for o in others]]) if others else trace,
        "assumptions": {},
        "notes": [],
    }
    if p is not None and t is not None and n is not None:
        doc["assumptions"]["hand input"] = (
            f"prefill {plain(p)} ms, {count(n, 'decode step')} × TPOT {plain(t)} ms (options)"
        )
        doc["sensitivity"] = sensitivity([p], [n], [t])
    return doc


def _traced_notes(doc: dict[str, Any], result: Any, inp: Any) -> None:
    """What the traced run adds to ``doc``: the CPU diagnostic, a noisy run's note, the replay's
    inputs and its step-cost model."""
    doc["diagnostic"] = result.diagnostic
    if result.diagnostic:
        doc["notes"].append("costs measured on a CPU: the answer is about this CPU run, not a GPU deployment")
    if inp is None:
        return
    sc = (getattr(result, "serving", None) or {}).get("step_cost") or {}
    if (sc.get("noise_share") or 0.0) > NOISY_SHARE:
        doc["notes"].append(
            f"the traced run was noisy: {sc['outliers']} steps hold {sc['noise_share'] * 100:.0f} % of its step "
            "time beyond the fit (host preemption); its measured latencies include that noise, the replay "
            "predicts the machine without it"
        )
    doc["assumptions"].update(inp.sources)
    c = inp.cost
    doc["assumptions"]["step cost model"] = (
        f"step ms = {plain(c.c0, 4)} + {plain(c.cp, 4)}·prefill tokens + {plain(c.cd, 4)}·decoding seqs "
        f"+ {plain(c.ck, 4)}·their context tokens, each ≥ 0 (docs/whatif.md)"
    )


def _without_replay(doc: dict[str, Any], lacks: list[str], arr: Any) -> dict[str, Any]:
    """The document when the replay cannot run: what it lacks; AnalysisError when ``--arrival`` was
    asked for, or when the sensitivity has no answer either."""
    doc["replay"] = {"lacks": lacks}
    why = "the replay lacks " + "; ".join(lacks)
    if arr is not None:
        raise AnalysisError(f"what-if --arrival {arr}: {why}")
    if "sensitivity" not in doc:
        raise AnalysisError(
            "what-if: nothing to answer from this trace: the sensitivity lacks "
            + "; ".join(doc.get("sensitivity_lacks") or [])
            + f"; {why}"
        )
    return doc


def traced_or_measured(
    doc: dict[str, Any], results: list[tuple[str | None, Any]], inp: Inputs | None, hand: Hand, no_hand: bool
) -> None:
    """``doc``'s sensitivity: per traced request when the replay's inputs exist and no hand value
    was given, else from the measured step times with the hand values replacing the trace's
    (docs/whatif.md, "Sensitivity"); what it lacks otherwise."""
    p, t, n = hand
    result = results[0][1]
    s = traced_sensitivity(result, inp.requests, inp.cost, inp.policy) if inp is not None and no_hand else {}
    if s and inp is not None:
        doc["sensitivity"] = s
        doc["assumptions"]["sensitivity"] = (
            "per traced request: prefill = the step-cost model's prefill of its prompt alone, in the "
            f"runner's chunks of ≤ {min(inp.policy.chunk, inp.policy.token_budget)} tokens (assumptions "
            "above); decode steps = output tokens − 1; TPOT = measured in the trace"
        )
        return
    ms, src, slacks = measured_sensitivity(results, p, t, n)
    doc["sensitivity_sources"] = src
    for k, v in src.items():
        doc["assumptions"][f"sensitivity {k}"] = v
    if ms is not None:
        doc["sensitivity"] = ms
    else:
        doc["sensitivity_lacks"] = slacks


def another_load(
    result: Any, inp: Inputs, arr: Arrival, seed: int | None, slo: dict[str, float | None] | None
) -> dict[str, Any]:
    """The ``--arrival`` block: the prediction at the new schedule on one worker, the replay of
    the traced arrivals, the measured figures and the model's error at the traced load."""
    times, where = arrival_times(arr, inp.requests, inp.schedule, inp.seed if seed is None else seed)
    traced = predict(inp.requests, [r.arrival_ms for r in inp.requests], inp, slo)
    meas = measured(result)
    pred = predict(inp.requests, times, inp, slo)
    out = {
        "arrival": str(arr),
        "arrivals": where,
        "traced_schedule": inp.schedule,
        "workers": 1,
        "predicted": pred,
        "replay_of_traced": traced,
        "measured_traced": meas,
        "error_at_traced_load": errors(traced, meas),
    }
    beyond = beyond_fit(pred.get("steps_run") or {}, ((result.serving or {}).get("step_cost") or {}).get("ranges"))
    return out | ({"extrapolates": beyond} if beyond else {})


def beyond_fit(run: dict[str, Any], ranges: dict[str, list[int]] | None) -> str | None:
    """Where the prediction's steps leave the compositions the fit was measured on (its ``ranges``
    of P and D), in words; None when they stay inside. The fit is linear in D: a batch larger than
    any traced one is priced at the traced per-sequence cost."""
    if not ranges or not run.get("steps"):
        return None
    d_hi, p_hi = ranges.get("D", [0, 0])[1], ranges.get("P", [0, 0])[1]
    parts = []
    over = sum(n for k, n in (run.get("decode_seqs") or {}).items() if int(k) > d_hi)
    if run["max_decode_seqs"] > d_hi:
        parts.append(
            f"{over} of its {run['steps']} steps decode more sequences than any traced step "
            f"(up to {run['max_decode_seqs']}, traced ≤ {d_hi})"
        )
    if run["max_prefill_tokens"] > p_hi:
        parts.append(f"prefill chunks up to {run['max_prefill_tokens']} tokens (traced ≤ {p_hi})")
    if not parts:
        return None
    return (
        "the prediction extrapolates the step-cost fit: "
        + "; ".join(parts)
        + ". Those steps are priced at the traced per-token and per-sequence costs; larger batches often "
        "cost less per sequence, so the figures may be high there"
    )


def link_entry(link_key: str, link_gbps: float | None) -> dict[str, Any]:
    """The link table's entry for ``link_key``, or a custom one for ``--link-gbps``."""
    if link_gbps is None:
        return link(link_key)
    if link_gbps <= 0:
        raise UsageError("--link-gbps must be > 0")
    return {"key": "custom", "name": f"{link_gbps} GB/s", "gbps": link_gbps, "source": "option --link-gbps"}
