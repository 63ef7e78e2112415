"""The ``tracekit whatif`` document: from an analysis result (the command loads and analyses the
trace), gather the inputs, answer, and return one JSON-able document that the text renderer prints."""

from __future__ import annotations

from typing import Any

from tracekit.numbers import count, plain
from tracekit.errors import UsageError
from tracekit.hardware.links import link
from tracekit.whatif import compare, inputs, sensitivity, traced_sensitivity


def run_whatif(
    trace: str | None,
    result: Any = None,
    hand: tuple[float | None, float | None, int | None] | None = None,
    prefill_workers: int = 1,
    decode_workers: int = 1,
    link_key: str = "nvlink4",
    link_gbps: float | None = None,
    link_efficiency: float = 1.0,
    link_latency_us: float = 0.0,
    kv_bytes_per_token: float | None = None,
    slo: str | None = None,
) -> dict[str, Any]:
    """The whatif document for ``result`` (the analysis of ``trace``; None with hand input only)."""
    from tracekit.analysis.serving.latency import Slo

    slo_v = Slo.parse(slo)
    if not 0 < link_efficiency <= 1:
        raise UsageError("--link-efficiency must be in (0, 1]")
    doc: dict[str, Any] = {"source": trace, "assumptions": {}, "notes": []}
    if hand is not None:
        p, t, n = hand
        assert p is not None and t is not None and n is not None
        if p < 0 or t < 0 or n < 0:
            raise UsageError("--prefill-ms, --tpot-ms and --decode-steps must be ≥ 0")
        doc["assumptions"]["hand input"] = (
            f"prefill {plain(p)} ms, {count(n, 'decode step')} × TPOT {plain(t)} ms (options)"
        )
        doc["sensitivity"] = sensitivity([p], [n], [t])
        if result is None:
            return doc
    doc["diagnostic"] = result.diagnostic
    inp = inputs(result, kv_bytes_per_token)
    if link_gbps is not None:
        if link_gbps <= 0:
            raise UsageError("--link-gbps must be > 0")
        entry: dict[str, Any] = {
            "key": "custom",
            "name": f"{link_gbps} GB/s",
            "gbps": link_gbps,
            "source": "option --link-gbps",
        }
    else:
        entry = link(link_key)
    bw = entry["gbps"] * 1e9 * link_efficiency
    c = inp.cost
    doc["assumptions"].update(inp.sources)
    doc["assumptions"]["step cost model"] = (
        f"step ms = {plain(c.c0, 4)} + {plain(c.cp, 4)}·prefill tokens + {plain(c.cd, 4)}·decoding seqs "
        f"+ {plain(c.ck, 4)}·their context tokens (docs/whatif.md)"
    )
    doc["assumptions"]["link"] = (
        f"{entry['name']}: {entry['gbps']} GB/s per direction × efficiency {link_efficiency} "
        f"+ {link_latency_us} µs per transfer; source: {entry['source']}"
    )
    doc["assumptions"]["colocated"] = (
        f"{prefill_workers + decode_workers} workers doing both phases (same worker count)"
    )
    if slo_v is not None:
        doc["assumptions"]["slo"] = str(slo_v.as_dict())
    if "sensitivity" not in doc:
        s = traced_sensitivity(result, inp)
        if s:
            doc["sensitivity"] = s
            doc["assumptions"]["sensitivity"] = (
                "per traced request: prefill = the step-cost model's prefill of its prompt "
                "alone; decode steps = output tokens − 1; TPOT = measured in the trace"
            )
    doc["compare"] = compare(
        inp, prefill_workers, decode_workers, bw, link_latency_us / 1e3, slo_v.as_dict() if slo_v else None
    )
    if result.diagnostic:
        doc["notes"].append("costs measured on a CPU: the answer is about this CPU run, not a GPU deployment")
    return doc
