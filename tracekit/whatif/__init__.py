"""``tracekit whatif``: what would change the latency, from measured costs only (docs/whatif.md).

Reads only an :class:`~tracekit.analysis.result.AnalysisResult` (its ``serving`` block, ``requests``
and ``latency``) plus options; never the trace. Three answers:

1. :mod:`tracekit.whatif.sensitivity` — the seed's question: per request E2E ≈ prefill + decode
   steps × TPOT, so halving prefill saves prefill / 2 and halving TPOT saves decode steps × TPOT / 2.
2. :func:`compare` — colocated vs disaggregated serving of the traced requests (their arrivals,
   prompt and output lengths) by the simulation of :mod:`tracekit.whatif.sim`; the conclusion is
   read off the simulated table (:mod:`tracekit.whatif.verdict`).
3. :mod:`tracekit.whatif.load` — the traced workload at another arrival schedule.

The replay (2, 3) needs a step-cost fit that is good enough (:func:`replay_lacks` says what is
missing when it is not) and the traced requests' arrivals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit.analysis.serving.step_cost import OUTLIER_MADS
from tracekit.errors import AnalysisError, UsageError
from tracekit.numbers import plain
from tracekit.whatif.sensitivity import sensitivity, traced_sensitivity
from tracekit.whatif.sim import REPLICATES, Policy, SimRequest, StepCost, metrics, simulate
from tracekit.whatif.verdict import verdict

__all__ = [
    "Inputs",
    "compare",
    "inputs",
    "percentile",
    "replay_lacks",
    "sensitivity",
    "summarise",
    "traced_sensitivity",
]

PCTS = (0.5, 0.9, 0.99)


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
        vals = [r[key] for r in rows if r.get(key) is not None]
        out[f"mean_{key}"] = sum(vals) / len(vals) if vals else None
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
    schedule: str | None = None  # the traced arrival schedule (sidecar), e.g. "poisson:20"
    seed: int = 0  # the traced run's seed (sidecar)


def replay_lacks(result: Any) -> list[str]:
    """What the replay lacks to run on ``result``, one item each (empty when it can run): a
    step-cost fit (and why there is none), a fit good enough to simulate with (and why not), the
    traced requests' arrivals."""
    sv = getattr(result, "serving", None) or {}
    sc = sv.get("step_cost") or {}
    lacks: list[str] = []
    if sc.get("intercept_ms") is None:
        lacks.append(f"a step-cost fit: {sc.get('why_none') or 'the trace has no serving steps'}")
    elif sc.get("refused"):
        lacks.append(f"a step-cost fit good enough to simulate with: {sc['refused']} ({fit_text(sc)})")
    if not sv.get("requests"):
        lacks.append(
            "per-request arrivals, prompt and output lengths (they come from the request ids of "
            "`tracekit run serve` step names; vLLM / SGLang step names carry none)"
        )
    return lacks


def fit_text(sc: dict[str, Any]) -> str:
    """The fit's quality in words: R², the residual spread, the steps it used."""
    parts = [f"non-negative least squares over {sc.get('n')} traced steps"]
    if sc.get("r2") is not None:
        parts.append(f"R² {sc['r2']:.3f}")
    res = sc.get("residual_ms") or {}
    if res:
        r = [plain(round(res[q], 3) + 0.0) for q in ("p10", "p50", "p90")]  # + 0.0: no "-0"
        parts.append(f"residual p10 / p50 / p90 {r[0]} / {r[1]} / {r[2]} ms")
    if sc.get("residual_rel_p90") is not None:
        parts.append(f"90 % of steps within ±{sc['residual_rel_p90'] * 100:.0f} % of the fit")
    if sc.get("outliers"):
        parts.append(
            f"{sc['outliers']} step{'s' if sc['outliers'] != 1 else ''} slower than the fit by > "
            f"{OUTLIER_MADS:g} robust deviations left out as host noise ({plain(sc['outlier_excess_ms'])} ms, "
            f"{sc['noise_share'] * 100:.1f} % of the step time: the replay predicts a machine without it)"
        )
    if sc.get("dropped"):
        parts.append(f"dropped (no variation): {', '.join(sc['dropped'])}")
    return ", ".join(parts)


def inputs(result: Any, kv_bytes_per_token: float | None = None, policy: Policy | None = None) -> Inputs:
    """Measured inputs from an analysis result (docs/whatif.md, "Inputs"). AnalysisError naming
    everything the replay lacks (:func:`replay_lacks`) when it cannot run."""
    lacks = replay_lacks(result)
    if lacks:
        raise AnalysisError("what-if replay: cannot run; it lacks " + "; ".join(lacks))
    sv = result.serving
    sc = sv["step_cost"]
    cost = StepCost(
        sc["intercept_ms"],
        sc["per_prefill_token_ms"],
        sc["per_decode_seq_ms"],
        sc["per_decode_kv_token_ms"],
        float(sc.get("gap_ms") or 0.0),
        tuple(float(x) for x in sc.get("noise_ratios") or ()),
        tuple(float(x) for x in sc.get("drift_ratios") or ()),
    )
    rq = sv["requests"]
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
    sources = {
        "requests": f"{len(reqs)} traced requests: arrivals, prompt tokens (Σ pf= chunks), output tokens",
        "step_cost": fit_text(sc),
        "step gap": (
            f"{plain(cost.gap)} ms added to every step: median host time between a step's end and the next "
            "decoding step's start (the serving loop outside the step's annotation)"
        ),
        "policy": ("tk:run annotation / sidecar" if lim and policy is None else "options / defaults")
        + f": token budget {pol.token_budget}, max seqs {pol.max_seqs}, chunk {pol.chunk}",
        "kv_bytes_per_token": kv_src,
    }
    return Inputs(reqs, cost, pol, kv_bytes_per_token, sources, lim.get("arrival"), int(lim.get("seed") or 0))


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
    arr = {r.id: r.arrival_ms for r in inp.requests}
    kv: float = inp.kv_bytes_per_token

    def both(seed: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The colocated and disaggregated summaries of one replay (``seed``: the host's noise)."""
        co = metrics(simulate(inp.requests, inp.cost, inp.policy, prefill_workers + decode_workers, seed=seed))
        dis = metrics(
            simulate(
                inp.requests,
                inp.cost,
                inp.policy,
                prefill_workers,
                decode_workers,
                kv,
                link_bytes_per_s,
                link_latency_ms,
                seed=seed,
            )
        )
        for rows in (co, dis):
            for r in rows:
                r["_arrival"], r["_finish"] = arr[r["request"]], arr[r["request"]] + r["e2el_ms"]
        return summarise(co, slo), summarise(dis, slo)

    c, d = both(None)
    xfer, removed = d["mean_transfer_ms"], c["mean_interference_ms"]
    v = verdict(c, d)
    # the same comparison in the replays that draw the traced steps' noise and drift (seeds as the
    # --arrival interval's): how often its outcome holds
    same = (
        sum(verdict(*both(seed))["outcome"] == v["outcome"] for seed in range(REPLICATES)) if inp.cost.noise else None
    )
    mechanism = (
        f"the KV transfer ({plain(xfer)} ms per request) {'<' if xfer < removed else '≥'} "
        f"the interference it removes ({plain(removed)} ms per request)"
    )
    return {
        "colocated": c,
        "disaggregated": d,
        "verdict": v["text"],
        "outcome": v["outcome"],
        "better": v["better"],
        "worse": v["worse"],
        "mechanism": mechanism,
        "transfer_less_than_interference": xfer < removed,
        "outcome_in_noisy_replays": None if same is None else {"same": same, "of": REPLICATES},
        "workers": {
            "prefill": prefill_workers,
            "decode": decode_workers,
            "colocated": prefill_workers + decode_workers,
        },
    }
