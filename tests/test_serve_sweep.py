"""Latency–throughput: the rate-sweep table, its per-rate numbers by hand, the plot and the report."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from tracekit.errors import UsageError
from tracekit.report.plots.latency import latency_throughput, per_rate, read_serve_sweep
from tracekit.report.plots.draw import MissingPlotData
from tracekit.workloads.serve_sweep import parse_rates, rows_of
from cli_run import tk_out, tk_process

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_traces" / "serve_sweep"


def test_parse_rates() -> None:
    assert parse_rates("5, 10,20.5") == [5.0, 10.0, 20.5]
    for bad in ("", "5,x", "0", "-1"):
        with pytest.raises(UsageError):
            parse_rates(bad)


def test_rows_and_per_rate_by_hand() -> None:
    # One run at 2 req/s: requests arrive at 0 and 100 ms, finish at 300 and 500 ms, 3 + 2 tokens:
    # duration 0.5 s, 10 tokens/s. TTFT 50 and 150 ms → p50 100, p90 140 (linear).
    side = {
        "requests": [
            {
                "id": 0,
                "prompt_tokens": 10,
                "output_tokens": 3,
                "arrival_ns": 0,
                "finish_ns": 300_000_000,
                "ttft_ns": 50_000_000,
                "tpot_ns": 125_000_000,
            },
            {
                "id": 1,
                "prompt_tokens": 20,
                "output_tokens": 2,
                "arrival_ns": 100_000_000,
                "finish_ns": 500_000_000,
                "ttft_ns": 150_000_000,
                "tpot_ns": 250_000_000,
            },
        ]
    }
    rows = rows_of(2.0, side, "rate_2/serve.pt.trace.json.gz")
    assert rows[0]["duration_s"] == 0.5 and rows[0]["output_tokens_per_s"] == 10.0 and rows[1]["e2el_ms"] == 400.0
    d = per_rate(pl.DataFrame(rows), {"ttft_ms": 100.0, "tpot_ms": None, "e2el_ms": None}).row(0, named=True)
    assert d["ttft_p50"] == pytest.approx(100.0) and d["ttft_p90"] == pytest.approx(140.0)
    assert d["served_req_per_s"] == 4.0 and d["good"] == 1 and d["goodput_req_per_s"] == 2.0


def test_sample_sweep_table_has_three_rates_and_plots() -> None:
    t = read_serve_sweep(SAMPLE)
    assert t is not None and t["rate_req_per_s"].n_unique() == 3
    fig = latency_throughput(
        t, {"ttft_ms": 300.0, "tpot_ms": 40.0, "e2el_ms": None}, "CPU diagnostic — not GPU evidence"
    )
    labels = [x.get_text() for ax in fig.axes for x in (ax.get_legend().get_texts() if ax.get_legend() else [])]
    assert "SLO TTFT 300 ms" in labels and "SLO TPOT 40 ms" in labels and "goodput (meet SLO)" in labels
    # each point says its sample size; with few requests a rate the plot warns that p99 is the slowest one
    n = per_rate(t).sort("rate_req_per_s")["requests"].to_list()
    notes = [x.get_text() for x in fig.axes[0].texts]
    assert notes[: len(n)] == [f"{r:g} req/s, n={k}" for r, k in zip(sorted(t["rate_req_per_s"].unique()), n)]
    if min(n) < 30:
        assert f"as few as {min(n)} requests a rate" in fig.axes[0].get_xlabel().replace("\n", " ")
    sys.path.insert(0, str(Path(__file__).parent))
    from test_plot_text_visible import texts_inside

    texts_inside(fig)
    assert (SAMPLE / "latency_throughput.png").stat().st_size > 10_000
    with pytest.raises(MissingPlotData):
        latency_throughput(pl.DataFrame({"x": [1]}))


def test_report_includes_latency_throughput_with_a_serve_sweep(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    tk_out(
        "report",
        REPO / "sample_traces/serve/serve.pt.trace.json.gz",
        "--sweep",
        SAMPLE,
        "--slo",
        "ttft=300,tpot=40",
        "--out",
        out,
    )
    text = out.read_text()
    assert (
        "Latency vs throughput (arrival-rate sweep)" in text
        and (tmp_path / "r_plots" / "latency-throughput.png").is_file()
    )
    assert "prefill–decode interference" in text


@pytest.mark.torch
def test_rate_sweep_outputs_carry_the_cpu_label(tmp_path: Path) -> None:
    """A CPU run's rate-sweep table says it is a CPU diagnostic in every output: each CSV/Parquet
    row and the JSON (issue 25; the phase-shape table did already)."""
    pytest.importorskip("torch")
    import json

    out = tmp_path / "sweep"
    small = ["--layers", "1", "--d-model", "64", "--heads", "2", "--kv-heads", "1", "--vocab", "256"]
    p = tk_process(
        *["run", "serve", *small, "--max-context", "64", "--threads", "1"],
        *["--requests", "2", "--prompt-len", "fixed:8", "--output-len", "fixed:2", "--token-budget", "16"],
        *["--max-seqs", "2", "--chunk", "8", "--warmup-requests", "0", "--rate-sweep", "50,100", "--out", out],
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    label = "CPU diagnostic — not GPU evidence"
    table = pl.read_parquet(out / "serve_sweep.parquet")
    assert table.height == 4 and table["diagnostic"].to_list() == [label] * 4  # 2 rates × 2 requests
    assert pl.read_csv(out / "serve_sweep.csv")["diagnostic"].to_list() == [label] * 4
    assert json.loads((out / "serve_sweep.json").read_text())["diagnostic"] == label
