"""``tracekit run serve --rate-sweep R1,R2,…``: the same load at several Poisson arrival rates.

Each rate runs :func:`tracekit.workloads.serve.run_serve` into ``<out>/rate_<R>/`` (trace +
sidecar) with ``--arrival poisson:R`` and the same seed, so the prompts and output lengths are the
same at every rate and only the arrivals differ. One table gathers every request of every run:
``serve_sweep.parquet`` and ``.csv`` (columns below) plus ``serve_sweep.json`` (config, runs).
Latencies are the runner's wall clock (the sidecar), which the trace-derived values match
(docs/serving.md); ``tracekit plot latency-throughput`` draws the table.

| column | meaning |
|---|---|
| rate_req_per_s | the offered Poisson arrival rate |
| request, prompt_tokens, output_tokens | the request |
| ttft_ms, tpot_ms, e2el_ms | its latencies (TPOT null for one token) |
| duration_s | that run's first arrival → last token |
| output_tokens_per_s | that run's output tokens / duration_s |
| trace | that run's trace file, relative to the table |
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tracekit.errors import UsageError
from tracekit.workloads.config import ServeConfig, as_dict
from tracekit.workloads.sidecar import write_json

COLUMNS = (
    "rate_req_per_s",
    "request",
    "prompt_tokens",
    "output_tokens",
    "ttft_ms",
    "tpot_ms",
    "e2el_ms",
    "duration_s",
    "output_tokens_per_s",
    "trace",
)


def parse_rates(text: str) -> list[float]:
    """``"5,10,20"`` → [5.0, 10.0, 20.0]; every rate > 0, at least one; UsageError otherwise."""
    out: list[float] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            raise UsageError(f"--rate-sweep: {part!r} is not a number of requests per second") from None
        if not v > 0:
            raise UsageError(f"--rate-sweep: {part} must be > 0")
        out.append(v)
    if not out:
        raise UsageError("--rate-sweep: give at least one rate, e.g. 5,10,20")
    return out


def rows_of(rate: float, side: dict[str, Any], trace: str) -> list[dict[str, Any]]:
    reqs = side["requests"]
    dur_s = (max(r["finish_ns"] for r in reqs) - min(r["arrival_ns"] for r in reqs)) / 1e9
    tokens = sum(r["output_tokens"] for r in reqs)
    return [
        {
            "rate_req_per_s": rate,
            "request": r["id"],
            "prompt_tokens": r["prompt_tokens"],
            "output_tokens": r["output_tokens"],
            "ttft_ms": r["ttft_ns"] / 1e6,
            "tpot_ms": r["tpot_ns"] / 1e6 if r["tpot_ns"] is not None else None,
            "e2el_ms": (r["finish_ns"] - r["arrival_ns"]) / 1e6,
            "duration_s": dur_s,
            "output_tokens_per_s": tokens / dur_s if dur_s > 0 else None,
            "trace": trace,
        }
        for r in reqs
    ]


def run_serve_sweep(cfg: ServeConfig, rates: list[float], out: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Run every rate; write the table; return (parquet path, rows)."""
    import polars as pl

    from tracekit.workloads.serve import run_serve

    rows: list[dict[str, Any]] = []
    runs = []
    diagnostic = None  # the CPU-diagnostic label of a CPU run (every run of a sweep is on one device)
    for rate in rates:
        name = f"rate_{rate:g}"
        res = run_serve(dataclasses.replace(cfg, arrival=f"poisson:{rate:g}"), out / name)
        diagnostic = diagnostic or res.summary.get("diagnostic")
        rows += rows_of(rate, res.summary, f"{name}/{res.trace.name}")
        runs.append(
            {"rate_req_per_s": rate, "trace": f"{name}/{res.trace.name}", "sidecar": f"{name}/{res.sidecar.name}"}
        )
    schema = {
        c: (pl.Float64 if c.endswith(("_ms", "_s", "_per_s")) else pl.String if c == "trace" else pl.Int64)
        for c in COLUMNS
    }
    df = pl.DataFrame(rows, schema=schema)  # type: ignore[arg-type]
    # every row says it, so the CSV and Parquet carry the label too (null on a GPU)
    df = df.with_columns(pl.lit(diagnostic, dtype=pl.String()).alias("diagnostic"))
    table = out / "serve_sweep.parquet"
    df.write_parquet(table)
    df.write_csv(out / "serve_sweep.csv")
    write_json(
        out / "serve_sweep.json",
        {
            "kind": "serve_rate_sweep",
            "diagnostic": diagnostic,
            "rates": rates,
            "config": as_dict(cfg),
            "runs": runs,
            "latency_source": "runner wall clock (sidecars)",
            "columns": list(COLUMNS),
        },
    )
    return table, rows
