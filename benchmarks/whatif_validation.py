"""Validate ``tracekit whatif --arrival`` against measured runs (issue 27 item 6; docs/whatif.md,
"Validation").

Runs ``tracekit run serve`` at a fit rate and at a predict rate, interleaved, ``--rounds`` times
(the same seed: the same prompts, output lengths and exponential draws; the order alternates,
fit rate first in odd rounds and predict rate first in even ones), then for every fit run
predicts the predict rate with ``tracekit whatif TRACE --arrival poisson:R`` and compares each
prediction with each measured run: the error of every (fit run, measured run) pair, its median and
range, and the spread of the measured runs themselves.

    .venv/bin/python benchmarks/whatif_validation.py --out /tmp/whatif-val --rounds 3
    .venv/bin/python benchmarks/whatif_validation.py --out /tmp/whatif-val --rounds 3 --skip-runs  # re-read
    .venv/bin/python benchmarks/whatif_validation.py --out /tmp/v2 --rounds 1 --requests 24 \
        --fit-rate 10 --predict-rate 30 --serve "--layers 2 --d-model 256 --token-budget 64"  # another config

Each prediction carries an interval (the 10–90 % of 20 noisy replays, docs/whatif.md "The
interval"): every pair also says whether the measured p50 lies inside it.

Needs torch (the ``workloads`` extra). Each run takes ~25 s on a 2-core CPU: keep the machine quiet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

KEYS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2el_ms", "E2E"))
QS = ("p50", "p90", "p99")


def tracekit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit.cli.main", *args], capture_output=True, text=True)


def whatif(trace: Path, rate: float) -> dict[str, Any] | str:
    p = tracekit("whatif", str(trace), "--arrival", f"poisson:{rate:g}", "--format", "json")
    return json.loads(p.stdout) if p.returncode == 0 else p.stderr.strip()


def analysis(trace: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(tracekit("analyze", str(trace), "--format", "json").stdout)
    return doc


def composition_ms(doc: dict[str, Any]) -> dict[tuple[Any, ...], tuple[float, int]]:
    """Steps of the run by composition (``serving.composition``: phase, decode sequences, prefill-token
    bucket; the context buckets pooled): (mean step ms, steps)."""
    acc: dict[tuple[Any, ...], list[float]] = {}
    for r in doc["totals"]["serving"]["composition"]:
        if r["steps"]:
            pf = () if r["phase"] == "decode" else (r["prefill_lo"], r["prefill_hi"])  # a decode step has none
            a = acc.setdefault((r["phase"], r["decode_seqs"], *pf), [0.0, 0])
            a[0] += r["mean_ms"] * r["steps"]
            a[1] += r["steps"]
    return {k: (t / n, int(n)) for k, (t, n) in acc.items()}


def speed(a: dict[tuple[Any, ...], tuple[float, int]], b: dict[tuple[Any, ...], tuple[float, int]]) -> float | None:
    """The median of b / a over the compositions both ran at least 3 times, weighted by steps."""
    pairs = sorted(
        (b[k][0] / a[k][0], min(a[k][1], b[k][1])) for k in a.keys() & b.keys() if min(a[k][1], b[k][1]) >= 3
    )
    half, acc = sum(w for _, w in pairs) / 2, 0
    for r, w in pairs:
        acc += w
        if acc >= half:
            return r
    return None


def host_speed(fit: dict[str, Any], meas: dict[str, Any]) -> tuple[float, str] | None:
    """The measured run's step time over the fit run's on the same work: steps of the same
    composition (:func:`composition_ms`, at least 3 in each run), the median ratio weighted by
    steps — the host's speed between the two runs (< 1: the measured run's host was faster) — with
    the pure-decode (bandwidth-heavy) and prefill-carrying (compute-heavy) ratios apart, which can
    differ (a host whose clock is lower slows the GEMMs of a 128-token step more than the weight
    reads of a decode step)."""
    a, b = composition_ms(fit), composition_ms(meas)
    r = speed(a, b)
    if r is None:
        return None
    dec = speed({k: v for k, v in a.items() if k[0] == "decode"}, b)
    pre = speed({k: v for k, v in a.items() if k[0] != "decode"}, b)
    part = ", ".join(f"{n} {x:.2f}" for n, x in (("decode steps", dec), ("prefill-carrying steps", pre)) if x)
    return r, part


def measured(trace: Path) -> tuple[dict[str, Any], str | None]:
    """The run's own TTFT / TPOT / E2E percentiles from the trace (``analyze`` JSON
    ``totals.requests``, linear percentiles as everywhere), and why the run is no valid reference
    (None when it is): its own step-cost fit refused, or host-noise outliers holding > 10 % of its
    step time — the machine was loaded while it ran."""
    from tracekit.whatif import percentile

    doc = analysis(trace)
    rows = [r for r in doc["totals"]["requests"] if r.get("source") == "trace"]
    pct = {
        k: {q: percentile([r[k] for r in rows if r.get(k) is not None], int(q[1:]) / 100) for q in QS} for k, _ in KEYS
    }
    sc = doc["totals"]["serving"]["step_cost"]
    why = sc.get("refused") or (
        f"host noise {sc['noise_share'] * 100:.0f} % of its step time" if (sc.get("noise_share") or 0) > 0.1 else None
    )
    return pct, why


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--fit-rate", type=float, default=20.0)
    ap.add_argument("--predict-rate", type=float, default=60.0)
    ap.add_argument("--skip-runs", action="store_true", help="only read the runs already in --out")
    ap.add_argument("--serve", default="", help="more `tracekit run serve` options (model size, budget, ...)")
    a = ap.parse_args()
    fit, pred = [], []
    for i in range(1, a.rounds + 1):
        pair = ((a.fit_rate, fit), (a.predict_rate, pred))
        # ABBA: odd rounds run the fit rate first, even rounds the predict rate first, so a host that
        # is faster for the second run of a pair (or the first) does not read as the model's error
        for rate, into in pair if i % 2 else pair[::-1]:
            d = a.out / f"p{rate:g}_{i}"
            if not a.skip_runs:
                p = tracekit(
                    "run", "serve", "--out", str(d), "--requests", str(a.requests),
                    "--arrival", f"poisson:{rate:g}", "--force", *a.serve.split(),
                )  # fmt: skip
                if p.returncode:
                    print(p.stderr, file=sys.stderr)
                    return 1
            into.append(d / "serve.pt.trace.json.gz")
    preds: list[tuple[str, dict[str, Any]]] = []
    fit_docs: dict[str, dict[str, Any]] = {}
    for t in fit:
        d = whatif(t, a.predict_rate)
        if isinstance(d, str):
            print(f"fit {t.parent.name}: refused — {d}")
            continue
        e = d["load"]["error_at_traced_load"]
        print(f"fit {t.parent.name}: {d['assumptions']['step_cost']}")
        print(
            f"    its error at the traced load (p50): TTFT {e['ttft_p50'] * 100:+.1f} %, "
            f"TPOT {e['tpot_p50'] * 100:+.1f} %, E2E {e['e2el_p50'] * 100:+.1f} %"
        )
        preds.append((t.parent.name, d["load"]["predicted"]))
        fit_docs[t.parent.name] = analysis(t)
    meas = []
    meas_docs: dict[str, dict[str, Any]] = {}
    for t in pred:
        m, why = measured(t)
        if why:
            p50 = f"TTFT p50 {m['ttft_ms']['p50']:.1f} ms, TPOT p50 {m['tpot_ms']['p50']:.1f} ms"
            print(f"measured {t.parent.name}: not a valid reference (a loaded machine): {why}; {p50}")
        else:
            meas.append((t.parent.name, m))
            meas_docs[t.parent.name] = analysis(t)
    for name, p in preds:
        print(f"predicted from {name}: " + ", ".join(f"{lab} p50 {p[k]['p50']:.1f} ms" for k, lab in KEYS))
    for name, m in meas:
        print(f"measured {name}: " + ", ".join(f"{lab} p50 {m[k]['p50']:.1f} ms" for k, lab in KEYS))
    print(f"\n{'figure':10} {'pairs':>5} {'median':>8} {'min':>8} {'max':>8}   (prediction − measured) / measured")
    for k, lab in KEYS:
        for q in QS:
            errs = [(p[k][q] - m[k][q]) / m[k][q] * 100 for _, p in preds for _, m in meas]
            if errs:
                print(
                    f"{lab + ' ' + q:10} {len(errs):>5} {statistics.median(errs):>+7.1f}% "
                    f"{min(errs):>+7.1f}% {max(errs):>+7.1f}%"
                )
    for k, lab in KEYS:
        inside = [
            lo <= m[k]["p50"] <= hi
            for _, p in preds
            for _, m in meas
            if (iv := (p.get("interval") or {}).get(k, {}).get("p50")) and (lo := iv[0]) is not None and (hi := iv[1])
        ]
        if inside:
            print(f"{lab} p50: measured inside the predicted 10–90 % interval in {sum(inside)} of {len(inside)} pairs")
    # The host's speed between the runs, from the steps both ran (the same composition):
    # the prediction carries the fit run's host; scaled to the measured run's, what is left is the
    # model's own error (docs/whatif.md, "Validation").
    for fname, p in preds:
        for mname, m in meas:
            sp = host_speed(fit_docs[fname], meas_docs[mname])
            if sp is None:
                print(f"{fname} → {mname}: no step composition both ran ≥ 3 times: host speed unknown")
                continue
            r, why = sp
            errs = ", ".join(f"{lab} {(p[k]['p50'] * r - m[k]['p50']) / m[k]['p50'] * 100:+.1f} %" for k, lab in KEYS)
            inside = sum(
                1
                for k, _ in KEYS
                if (iv := (p.get("interval") or {}).get(k, {}).get("p50")) and iv[0] * r <= m[k]["p50"] <= iv[1] * r
            )
            print(
                f"{fname} → {mname}: host speed {r:.2f} ({why}); at the measured run's speed the p50 errors are "
                f"{errs}; measured p50 inside the scaled interval {inside} of {len(KEYS)}"
            )
    for k, lab in KEYS:
        v = [m[k]["p50"] for _, m in meas]
        if v:
            rng = f"{min(v):.1f} – {max(v):.1f} ms (max / min {max(v) / min(v):.2f})"
            print(f"measured {lab} p50 across the {len(v)} runs at {a.predict_rate:g}/s: {rng}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
