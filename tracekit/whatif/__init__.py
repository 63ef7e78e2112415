"""``tracekit whatif``: what would change the latency, from measured costs only (docs/whatif.md).

Reads only an :class:`~tracekit.analysis.result.AnalysisResult` (its ``serving`` block, ``requests``
and ``latency``) plus options; never the trace. Two answers:

1. :func:`sensitivity` — the seed's question: per request E2E ≈ prefill + decode steps × TPOT, so
   halving prefill saves prefill / 2 and halving TPOT saves decode steps × TPOT / 2.
2. :func:`compare` — colocated vs disaggregated serving of the traced requests (their arrivals,
   prompt and output lengths) by the simulation of :mod:`tracekit.whatif.sim`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit.numbers import plain
from tracekit.errors import AnalysisError, UsageError
from tracekit.whatif.sim import Policy, SimRequest, StepCost, metrics, simulate

PCTS = (0.5, 0.9, 0.99)


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


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default, vLLM's convention)."""
    v = sorted(values)
    if not v:
        return None
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarise(rows: list[dict[str, Any]], slo: dict[str, float | None] | None) -> dict[str, Any]:
    """Percentiles of TTFT / TPOT / E2E, means of interference and transfer, goodput under ``slo``."""
    out: dict[str, Any] = {"requests": len(rows)}
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        vals = [r[key] for r in rows if r[key] is not None]
        out[key] = {f"p{int(q * 100)}": percentile(vals, q) for q in PCTS}
    for key in ("interference_ms", "transfer_ms"):
        out[f"mean_{key}"] = sum(r[key] for r in rows) / len(rows) if rows else None
    if slo and rows:
        good = [r for r in rows if _meets(r, slo)]
        span_s = (max(r["_finish"] for r in rows) - min(r["_arrival"] for r in rows)) / 1e3
        out["goodput_req_per_s"] = len(good) / span_s if span_s > 0 else None
        out["goodput_fraction"] = len(good) / len(rows)
    return out


def _meets(r: dict[str, Any], slo: dict[str, float | None]) -> bool:
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        lim = slo.get(key)
        if lim is not None and r[key] is not None and r[key] > lim:
            return False
    return True


@dataclass(frozen=True)
class Inputs:
    """Everything the what-if uses, each with where it came from (printed with the answer)."""

    requests: list[SimRequest]
    cost: StepCost
    policy: Policy
    kv_bytes_per_token: float | None
    sources: dict[str, str]


def inputs(result: Any, kv_bytes_per_token: float | None = None, policy: Policy | None = None) -> Inputs:
    """Measured inputs from an analysis result (docs/whatif.md, "Inputs"). AnalysisError when the
    trace has no step-cost model or no per-request arrivals."""
    sv = getattr(result, "serving", None) or {}
    sc = sv.get("step_cost") or {}
    if sc.get("intercept_ms") is None:
        raise AnalysisError(
            "what-if: the trace has no steps with a known composition to fit a step cost "
            f"({sc.get('why_none') or 'no serving steps'})"
        )
    cost = StepCost(
        sc["intercept_ms"], sc["per_prefill_token_ms"], sc["per_decode_seq_ms"], sc["per_decode_kv_token_ms"]
    )
    rq = sv.get("requests") or []
    if not rq:
        raise AnalysisError(
            "what-if: no per-request arrivals in this trace (they come from the request ids of "
            "`tracekit run serve` step names); the sensitivity alone: tracekit whatif --prefill-ms … --tpot-ms …"
        )
    t0 = min(int(r["arrival_ns"]) for r in rq)
    reqs = [
        SimRequest(
            int(r["request"]), (int(r["arrival_ns"]) - t0) / 1e6, int(r["prompt_tokens"]), int(r["output_tokens"])
        )
        for r in rq
    ]
    lim = sv.get("scheduler") or {}
    pol = policy or Policy(lim.get("token_budget", 256), lim.get("max_seqs", 8), lim.get("chunk", 256))
    kv_src = "option --kv-bytes-per-token"
    if kv_bytes_per_token is None:
        kv = sv.get("kv") or {}
        kv_bytes_per_token = kv.get("bytes_per_token")
        kv_src = (
            (
                f"trace shapes: 2 × {kv.get('layers')} layers × {kv.get('kv_heads')} KV heads × {kv.get('head_dim')} × "
                f"{kv.get('element_bytes')} B ({kv.get('source')})"
            )
            if kv_bytes_per_token
            else str(kv.get("why_none"))
        )
    r2 = sc.get("r2")
    sources = {
        "requests": f"{len(reqs)} traced requests: arrivals, prompt tokens (Σ pf= chunks), output tokens",
        "step_cost": (
            f"least squares over {sc.get('n')} traced steps, R² {r2:.3f}"
            if r2 is not None
            else f"least squares over {sc.get('n')} traced steps"
        )
        + (f"; dropped {sc['dropped']}" if sc.get("dropped") else ""),
        "policy": ("tk:run annotation" if lim and policy is None else "options / defaults")
        + f": token budget {pol.token_budget}, max seqs {pol.max_seqs}, chunk {pol.chunk}",
        "kv_bytes_per_token": kv_src,
    }
    return Inputs(reqs, cost, pol, kv_bytes_per_token, sources)


def compare(
    inp: Inputs,
    prefill_workers: int,
    decode_workers: int,
    link_bytes_per_s: float,
    link_latency_ms: float = 0.0,
    slo: dict[str, float | None] | None = None,
) -> dict[str, Any]:
    """Colocated serving on P + D workers vs disaggregated P prefill + D decode workers."""
    if prefill_workers < 1 or decode_workers < 1:
        raise UsageError("--prefill-workers and --decode-workers must be ≥ 1")
    if inp.kv_bytes_per_token is None:
        raise UsageError("KV bytes per token unknown from the trace's shapes: pass --kv-bytes-per-token")
    if link_bytes_per_s <= 0:
        raise UsageError("link bandwidth must be > 0")
    co = metrics(simulate(inp.requests, inp.cost, inp.policy, prefill_workers + decode_workers))
    dis = metrics(
        simulate(
            inp.requests,
            inp.cost,
            inp.policy,
            prefill_workers,
            decode_workers,
            inp.kv_bytes_per_token,
            link_bytes_per_s,
            link_latency_ms,
        )
    )
    arr = {r.id: r.arrival_ms for r in inp.requests}
    for rows in (co, dis):
        for r in rows:
            r["_arrival"], r["_finish"] = arr[r["request"]], arr[r["request"]] + r["e2el_ms"]
    c, d = summarise(co, slo), summarise(dis, slo)
    xfer, removed = d["mean_transfer_ms"], c["mean_interference_ms"]
    verdict = (
        ("disaggregation pays: the KV transfer" if xfer < removed else "disaggregation does not pay: the KV transfer")
        + f" ({plain(xfer)} ms per request) {'<' if xfer < removed else '≥'} "
        f"the interference it removes ({plain(removed)} ms per request)"
    )
    return {
        "colocated": c,
        "disaggregated": d,
        "verdict": verdict,
        "transfer_less_than_interference": xfer < removed,
        "workers": {
            "prefill": prefill_workers,
            "decode": decode_workers,
            "colocated": prefill_workers + decode_workers,
        },
    }


def traced_sensitivity(result: Any, inp: Inputs) -> dict[str, Any]:
    """The seed's question for the traced length distribution: per request, prefill = the step-cost
    model's prefill of its prompt alone (c0 + cp · prompt tokens), decode steps = output tokens − 1
    (the first token comes from the prefill), TPOT = its TPOT measured in the trace."""
    tpot: dict[int, float] = {}
    req = getattr(result, "requests", None)
    if req is not None and req.height:
        for r in req.filter(req["source"] == "trace").to_dicts():
            if r.get("tpot_ms") is not None:
                tpot[int(r["request"])] = float(r["tpot_ms"])
    rs = [r for r in inp.requests if r.output > 1 and r.id in tpot]
    if not rs:
        return {}
    out = sensitivity(
        [inp.cost.c0 + inp.cost.cp * r.prompt for r in rs], [r.output - 1 for r in rs], [tpot[r.id] for r in rs]
    )
    out["mean_prompt_tokens"] = sum(r.prompt for r in rs) / len(rs)
    out["mean_output_tokens"] = sum(r.output for r in rs) / len(rs)
    return out
