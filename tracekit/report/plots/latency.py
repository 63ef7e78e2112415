"""Latency–throughput plot of a ``tracekit run serve --rate-sweep`` table (docs/reports.md).

Per arrival rate: x = output tokens/s of that run; TTFT and TPOT p50 / p90 / p99 (two panels, ms);
the SLO as a horizontal line on each panel when given; goodput (requests meeting every SLO ÷ the
run's duration) in a third panel, or the requests/s served when no SLO is given. Percentiles by
linear interpolation (vLLM's convention). Throughput can rise while each user waits longer: this
is the plot that shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from tracekit.conventions import CPU_DIAGNOSTIC
from tracekit.numbers import count, plain
from tracekit.errors import UsageError
from tracekit.inputs import read_json
from tracekit.report.output import table_file
from tracekit.report.plots.canvas import MissingPlotData, figure, note, stamp, xlabel

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NEEDED = ("rate_req_per_s", "ttft_ms", "tpot_ms", "output_tokens_per_s", "duration_s")
PCT_STYLE = {"p50": "-", "p90": "--", "p99": ":"}


def is_serve_sweep(table: pl.DataFrame) -> bool:
    return all(c in table.columns for c in NEEDED)


def read_serve_sweep(path: str | Path) -> pl.DataFrame | None:
    """The sweep table at ``path`` (its .parquet / .csv, or a directory holding serve_sweep.*),
    or None when ``path`` is not a serve sweep."""
    p = table_file(path, "serve_sweep")
    if p is None or not p.is_file() or p.suffix not in (".parquet", ".csv"):
        return None
    try:
        df = pl.read_parquet(p) if p.suffix == ".parquet" else pl.read_csv(p)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UsageError(f"{p}: cannot read the sweep table ({exc.__class__.__name__})") from None
    return df if is_serve_sweep(df) else None


def sweep_diagnostic(path: str | Path) -> str | None:
    """The CPU-diagnostic label unless serve_sweep.json beside the table says the runs were on CUDA."""
    p = Path(path)
    meta = (p if p.is_dir() else p.parent) / "serve_sweep.json"
    try:
        device = str(read_json(meta, "sweep metadata", UsageError).get("config", {}).get("device", "cpu"))
    except (UsageError, AttributeError):
        device = "cpu"
    return None if device.startswith("cuda") else CPU_DIAGNOSTIC


FEW_REQUESTS = 30  # below this many requests at a rate, its percentiles are noise-dominated (said on the plot)


def per_rate(table: pl.DataFrame, slo: Mapping[str, Any] | None = None) -> pl.DataFrame:
    """One row per rate: output tokens/s, TTFT/TPOT p50/p90/p99, requests/s served, goodput."""

    def q(c: str, p: float) -> pl.Expr:
        return pl.col(c).drop_nulls().quantile(p, interpolation="linear").alias(f"{c[:-3]}_p{int(p * 100)}")

    ok = pl.lit(True)
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        lim = (slo or {}).get(key)
        if lim is not None and key in table.columns:
            ok = ok & (pl.col(key).is_null() | (pl.col(key) <= lim))
    return (
        table.with_columns(ok.alias("_good"))
        .group_by("rate_req_per_s")
        .agg(
            pl.col("output_tokens_per_s").first(),
            pl.len().alias("requests"),
            pl.col("duration_s").first(),
            *[q(c, p) for c in ("ttft_ms", "tpot_ms") for p in (0.5, 0.9, 0.99)],
            pl.col("_good").sum().alias("good"),
        )
        .with_columns(
            (pl.col("requests") / pl.col("duration_s")).alias("served_req_per_s"),
            (pl.col("good") / pl.col("duration_s")).alias("goodput_req_per_s"),
        )
        .sort("rate_req_per_s")
    )


def latency_throughput(
    table: pl.DataFrame, slo: Mapping[str, Any] | None = None, diagnostic: str | None = None
) -> "Figure":
    if table.height == 0 or not is_serve_sweep(table):
        raise MissingPlotData(
            f"latency-throughput: the table needs columns {', '.join(NEEDED)} (tracekit run serve --rate-sweep)"
        )
    d = per_rate(table, slo)
    has_slo = any((slo or {}).get(k) is not None for k in ("ttft_ms", "tpot_ms", "e2el_ms"))
    fig = figure(12.0, 4.6)
    axes = fig.subplots(1, 3)
    x = d["output_tokens_per_s"].to_list()
    for ax, metric, title in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT")):
        for p, ls in PCT_STYLE.items():
            ax.plot(x, d[f"{metric}_{p}"].to_list(), marker="o", ls=ls, label=f"{title} {p}")
        lim = (slo or {}).get(f"{metric}_ms")
        if lim is not None:
            ax.axhline(lim, color="red", lw=1.2, label=f"SLO {title} {plain(lim)} ms")
        for xi, yi, r, n in zip(x, d[f"{metric}_p99"].to_list(), d["rate_req_per_s"].to_list(), d["requests"]):
            label = f"{plain(r)} req/s, n={n}"  # each point's sample size beside it
            ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(3, 4), fontsize=7)
        xlabel(ax, "output tokens/s")
        ax.set_ylabel(f"{title} (ms)")
        ax.set_title(f"{title} vs throughput")
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=7)
    few = int(d["requests"].min() or 0)  # type: ignore[arg-type]
    if few < FEW_REQUESTS:
        note(
            axes[0],
            f"as few as {count(few, 'request')} a rate: p99 is about the slowest one and rates whose p50–p90 "
            "ranges overlap are not told apart (repeat or lengthen the sweep)",
            warning=True,
        )
    ax = axes[2]
    ax.plot(x, d["served_req_per_s"].to_list(), marker="o", color="#777777", label="requests/s served")
    if has_slo:
        ax.plot(x, d["goodput_req_per_s"].to_list(), marker="s", color="#1b9e77", label="goodput (meet SLO)")
    xlabel(ax, "output tokens/s")
    ax.set_ylabel("requests/s")
    ax.set_title("Goodput vs throughput" if has_slo else "Requests served (give --slo for goodput)")
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=7)
    fig.suptitle("Latency vs throughput over the arrival-rate sweep")
    return stamp(fig, diagnostic)
