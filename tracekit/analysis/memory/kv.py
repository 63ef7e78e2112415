"""The KV cache checked against the model, and the headroom (docs/analysis.md, "Memory").

The model's KV bytes per token = 2 · layers · KV heads · head_dim · element size (MLA: the
compressed latent; per rank under tensor parallelism): from ``--model``, else the runner's own
model (its sidecar's ``config.model``), else the trace's attention shapes. It is compared with
the measured growth per generated decode token: within :data:`NO_GROWTH` of zero the cache does
not grow (a pre-allocated pool), and the pool's size is the runner's ``shapes.kv_cache`` (K and V
of [layers, slots, kv_heads, max_context, head_dim]) or, for an engine, the largest allocation
live at the trace's end. The headroom is the device's memory less the peak reserved (and less the
peak allocated), in bytes and in tokens of KV cache.
"""

from __future__ import annotations

from math import prod
from typing import Any

from tracekit.costmodel.model import kv_from_config
from tracekit.numbers import count, si

NO_GROWTH = 0.05  # measured growth below 5 % of the model's bytes per token: no growth
AS_PREDICTED = 0.10  # within 10 % of the model's bytes per token: grows as the model predicts


def runner_model(sidecar: dict[str, Any] | None) -> dict[str, Any] | None:
    """The runner's model as a config :func:`kv_from_config` reads (None without one)."""
    cfg = (sidecar or {}).get("config")
    model = cfg.get("model") if isinstance(cfg, dict) else None
    shapes = (sidecar or {}).get("shapes") or {}
    if not isinstance(model, dict) or not isinstance(shapes, dict):
        return None
    layers, heads = model.get("layers"), model.get("heads")
    n_kv = shapes.get("kv_heads") or model.get("n_kv") or heads
    d = shapes.get("head_dim")
    if d is None and isinstance(model.get("d_model"), int) and isinstance(heads, int) and heads > 0:
        d = model["d_model"] // heads
    if not all(isinstance(v, int) and v > 0 for v in (layers, n_kv, d)):
        return None
    return {
        "num_hidden_layers": layers,
        "num_key_value_heads": n_kv,
        "head_dim": d,
        "dtype": model.get("dtype") or "float32",
        "source": "of the runner (sidecar)",
    }


def model_kv(model: dict[str, Any] | None, sidecar: dict[str, Any] | None, kv: dict[str, Any] | None) -> dict[str, Any]:
    """``bytes_per_token`` and its ``source``: --model, the runner's model, the trace's shapes."""
    for cfg in (model, runner_model(sidecar)):
        got = kv_from_config(cfg) if cfg else None
        if got is not None:
            return got
    if kv and kv.get("bytes_per_token"):
        return {**kv, "source": kv.get("source") or "the trace's attention shapes"}
    return {"bytes_per_token": None, "why_none": "no --model, no runner model and no attention shapes"}


def runner_pool(sidecar: dict[str, Any] | None, element_bytes: float | None) -> dict[str, Any] | None:
    """The runner's pre-allocated cache: K and V of ``shapes.kv_cache`` at the element size."""
    shapes = (sidecar or {}).get("shapes") or {}
    shape = shapes.get("kv_cache") if isinstance(shapes, dict) else None
    if shapes.get("kv_cache_layout", "pool") != "pool" or not element_bytes:
        return None
    if not (isinstance(shape, list) and len(shape) == 5 and all(isinstance(v, int) and v >= 0 for v in shape)):
        return None
    return {
        "bytes": int(2 * prod(shape) * element_bytes),
        "source": f"the runner's cache: K and V of {shape} (layers, slots, kv_heads, max_context, head_dim) "
        f"× {element_bytes:g} B",
    }


def engine_pool(never: dict[str, Any]) -> dict[str, Any] | None:
    """The largest single allocation live at the trace's end (an engine's paged pool)."""
    rows = never.get("by_op") or []
    if not rows:
        return None
    top = max(rows, key=lambda r: r["largest"])
    return {
        "bytes": int(top["largest"]),
        "source": f"the largest allocation live at the trace's end ({top['op']})",
    }


def kv_check(
    kv: dict[str, Any], decode: dict[str, Any] | None, sidecar: dict[str, Any] | None, never: dict[str, Any]
) -> dict[str, Any]:
    """The check's fields and its sentence (``verdict``)."""
    b = kv.get("bytes_per_token")
    g = decode.get("growth_per_token_bytes") if decode else None
    out: dict[str, Any] = {
        "bytes_per_token": b,
        "source": kv.get("source") or kv.get("why_none"),
        "measured_per_token_bytes": g,
        "decode_tokens": decode.get("tokens") if decode else None,
    }
    if not b:
        out["verdict"] = "no KV bytes per token: " + str(kv.get("why_none") or "the model does not say")
        return out
    if g is None:
        out["verdict"] = "no decode steps with token counts: growth per token not measured"
        return out
    if abs(g) < NO_GROWTH * b:
        pool = runner_pool(sidecar, kv.get("element_bytes")) or engine_pool(never)
        if pool is None:
            out["verdict"] = f"no growth ({g:,.0f} B/token measured): no pre-allocated pool found"
            return out
        tokens = int(pool["bytes"] // b)
        out.update(pool_bytes=pool["bytes"], pool_tokens=tokens, pool_source=pool["source"])
        out["verdict"] = (
            f"no growth: pre-allocated pool of {si(pool['bytes'], 'B')} = {count(tokens, 'token')} "
            f"at {b:,.0f} bytes/token ({pool['source']})"
        )
        return out
    off = g / b - 1
    out["off"] = off
    if abs(off) <= AS_PREDICTED:
        out["verdict"] = f"grows as the model predicts (within {abs(off) * 100:.1f} %): {g:,.0f} of {b:,.0f} B/token"
    else:
        out["verdict"] = f"grows {g:,.0f} B/token, {g / b:.2f}× the model's {b:,.0f}: not as the model predicts"
    return out


def device_memory(devices: list[dict[str, Any]], device: str) -> dict[str, Any] | None:
    """The memory of ``device`` ("cuda:1") from the trace's device properties (else --hardware's,
    :func:`hardware_memory`)."""
    if device in ("", "cpu"):
        return None
    want = device.rsplit(":", 1)[-1]
    for d in devices:
        if isinstance(d, dict) and str(d.get("id")) == want and isinstance(d.get("total_memory_bytes"), int):
            return {"bytes": d["total_memory_bytes"], "source": "the trace's device properties"}
    return None


def hardware_memory(hardware: Any) -> dict[str, Any] | None:
    """The memory a hardware file gives (``--hardware FILE`` with ``memory_bytes``), else None."""
    size = getattr(hardware, "memory_bytes", None)
    if not size:
        return None
    return {"bytes": int(size), "source": f"--hardware {hardware.name} (memory_bytes)"}


def headroom(total: dict[str, Any] | None, peak: dict[str, Any], b: float | None) -> dict[str, Any]:
    """Device memory less the peak reserved and less the peak allocated, in bytes and KV tokens."""
    if total is None:
        return {"device_memory_bytes": None, "why_none": "the trace does not give the device's memory"}
    res = peak.get("reserved_peak_bytes")
    free_res = total["bytes"] - res if res is not None else None
    free_alloc = total["bytes"] - peak["allocated_bytes"]
    return {
        "device_memory_bytes": total["bytes"],
        "source": total["source"],
        "headroom_bytes": free_res,
        "headroom_allocated_bytes": free_alloc,
        "headroom_tokens": int(free_res // b) if b and free_res is not None else None,
        "headroom_allocated_tokens": int(free_alloc // b) if b else None,
    }
