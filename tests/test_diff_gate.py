"""tracekit diff --gate: the noise test by hand, features that make runs not comparable, and the
CLI's exit codes on constructed vLLM-style runs (tests/serving_traces.py: one prefill, 40 decode
steps, every kernel jittered by ±3 % from a seed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from serving_traces import PREFIX_PREFILL_NAME, write_serving_trace  # noqa: E402
from cli_run import tk, tk_out  # noqa: E402

from tracekit.analysis import features  # noqa: E402
from tracekit.report import gate as gate_mod  # noqa: E402
from tracekit.report.diff import Diff  # noqa: E402
from tracekit.report.formats.diff_markdown import MAX_CHARS, render_md  # noqa: E402


def _samples(phase: str, values: list[float], metric: str = "step time", stat: str = "p50") -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame({"phase": [phase] * n, "metric": [metric] * n, "stat": [stat] * n, "value": values})


def test_gate_by_hand() -> None:
    # 10 identical decode steps a side: every resample has the same median, so the interval is the
    # change itself: 125 / 100 − 1 = +25 % (fails at 5 %), 101 / 100 − 1 = +1 % (passes).
    a = _samples("decode", [100.0] * 10)
    g = gate_mod.gate(a, _samples("decode", [125.0] * 10), 0.05)
    r = g.checks.row(0, named=True)
    assert (r["change"], r["ci_low"], r["ci_high"], r["regressed"]) == (pytest.approx(0.25),) * 3 + (True,)
    assert g.exit_code == 1 and g.verdict().startswith("gate: FAIL: decode step time p50 +25.0 %")
    g = gate_mod.gate(a, _samples("decode", [101.0] * 10), 0.05)
    assert g.exit_code == 0 and g.checks["change"][0] == pytest.approx(0.01)
    # B faster never fails
    assert gate_mod.gate(a, _samples("decode", [50.0] * 10), 0.05).exit_code == 0


def test_gate_noise_widens_the_interval() -> None:
    # A: 20 steps alternating 90 / 110 (median 100); B the same plus 8: median 108, +8 %. The
    # resampled medians of each side range over 90 … 110 (a median of 20 draws of two values lands
    # on 90, 100 or 110), so the interval's low end is far below +5 %: noise, not a regression.
    a = _samples("decode", [90.0, 110.0] * 10)
    b = _samples("decode", [98.0, 118.0] * 10)
    r = gate_mod.gate(a, b, 0.05).checks.row(0, named=True)
    assert r["change"] == pytest.approx(0.08)
    assert r["ci_low"] < 0.05 < r["ci_high"] and not r["regressed"]
    # deterministic: the same inputs give the same interval
    assert gate_mod.gate(a, b, 0.05).checks.row(0, named=True)["ci_low"] == r["ci_low"]


def test_single_sample_is_the_threshold_alone() -> None:
    # one prefill step a side: 106 / 100 − 1 = +6 % > 5 % fails, +4 % passes; the note says why
    g = gate_mod.gate(_samples("prefill", [100.0]), _samples("prefill", [106.0]), 0.05)
    assert g.exit_code == 1 and g.checks["ci_low"][0] is None
    assert "threshold alone" in g.checks["method"][0] and "no noise estimate" in g.notes[0]
    assert gate_mod.gate(_samples("prefill", [100.0]), _samples("prefill", [104.0]), 0.05).exit_code == 0
    # without a noise estimate a class's time is not tested at all (only the headline figures)
    g = gate_mod.gate(
        _samples("prefill", [100.0], "gemm time", "sum"), _samples("prefill", [200.0], "gemm time", "sum"), 0.05
    )
    # ... and a gate that tested nothing never passes: not comparable (exit 7), saying so
    assert g.checks.height == 0 and g.exit_code == 7
    assert g.verdict() == "gate: NOT COMPARABLE: no check could be made: the runs share no phase with measured steps"


def test_a_phase_missing_on_one_side_is_not_comparable() -> None:
    # BASE has prefill and decode, NEW only prefill (equal): the decode phase is gone, exit 7
    a = pl.concat([_samples("prefill", [100.0] * 5), _samples("decode", [50.0] * 5)])
    g = gate_mod.gate(a, _samples("prefill", [100.0] * 5), 0.05)
    assert g.checks.height == 1 and g.exit_code == 7
    assert g.verdict() == "gate: NOT COMPARABLE: BASE's decode phase is missing in NEW"
    # a different device is a difference --allow-feature-change may allow; a missing phase is not
    ids = ({"device": "NVIDIA H100 80GB HBM3", "dtype": "bf16"}, {"device": "AMD Instinct MI300X VF", "dtype": "bf16"})
    same = _samples("prefill", [100.0] * 5)
    g = gate_mod.gate(same, same, 0.05, identities=ids)
    assert (
        g.exit_code == 7 and "the runs differ in device: NVIDIA H100 80GB HBM3 vs AMD Instinct MI300X VF" in g.verdict()
    )
    assert gate_mod.gate(same, same, 0.05, allow_feature_change=True, identities=ids).exit_code == 0
    assert gate_mod.gate(a, same, 0.05, allow_feature_change=True, identities=ids).exit_code == 7


def test_parse_threshold() -> None:
    assert gate_mod.parse_threshold("5%") == 0.05 and gate_mod.parse_threshold(" 12.5 ") == 0.125
    from tracekit.errors import UsageError

    for bad in ("five", "0", "-3%"):
        with pytest.raises(UsageError):
            gate_mod.parse_threshold(bad)


def test_prefix_caching_from_step_names() -> None:
    # context part sq512sk1536: 512 new tokens attend over 1,536 keys, 1,024 from the cache
    lab = pl.DataFrame({"name": [PREFIX_PREFILL_NAME, "execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk2052)"]})
    row = features.prefix_caching(lab)
    assert row["state"] == "yes" and "1,024 cached tokens" in row["detail"]
    plain = pl.DataFrame({"name": ["execute_512_context_1(sq512sk512sqsq1sqsk1)_generation_0(sq0sk0)"]})
    assert features.prefix_caching(plain)["state"] == "no"
    # SGLang's c_sq / c_sk
    assert features.prefix_caching(pl.DataFrame({"name": ["step[EXTEND bs=2 c_sq=100 c_sk=300]"]}))["state"] == "yes"
    # names that do not tell: unknown, which never counts as a difference
    unk = features.prefix_caching(pl.DataFrame({"name": ["tk:prefill step=0"]}))
    assert unk["state"] == features.UNKNOWN
    assert features.differences([unk], [row]) == []
    assert features.differences([features.prefix_caching(plain)], [row]) == ["prefix caching: no vs yes"]


def test_feature_families_from_names() -> None:
    k = pl.Series(["triton_poi_fused_add_0", "flash_fwd_splitkv_kernel", "void vllm::x<(vllm::Fp8KVCacheDataType)0>"])
    assert features.compiled(None, k)["state"] == "yes"
    assert features.attention_backend(k)["state"] == "FlashAttention"
    # an AMD CK kernel is not FlashInfer (the pattern is anchored on FlashInfer's own kernel name)
    ck = pl.Series(["_ZN7ck_tile6kentryINS_31FmhaBatchPrefillWithPagedKVCacheKernelIiEEEEvT_"])
    assert features.attention_backend(ck)["state"] == "CK attention"
    fi = pl.Series(["void flashinfer::BatchPrefillWithPagedKVCacheKernel<128u, 4u>(float*)"])
    assert features.attention_backend(fi)["state"] == "FlashInfer"
    # the engine from the step annotations' grammar; SGLang's traces carry vLLM-style names too
    vllm = pl.DataFrame({"name": ["execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk8sqsq4sqsk8)"]})
    assert features.engine(vllm, {})["state"] == "vLLM"
    both = pl.DataFrame({"name": ["step[DECODE bs=32]", "execute_32_context_0(sq0sk0)"]})
    assert features.engine(both, {})["state"] == "SGLang"
    assert features.engine(both, {"layout": {"engine": "vllm"}})["state"] == "vLLM"
    assert features.engine(pl.DataFrame({"name": ["tk:decode step=1"]}), {})["state"] == features.UNKNOWN
    # the fp8 KV-cache template parameter of vLLM's cache kernels is not fp8 quantisation
    assert features.quantisation(k.str.replace_all(features.KV_CACHE_TYPE, ""))["state"] == "none seen"
    assert (
        features.quantisation(pl.Series(["_matmul_ogs_bf16xbf16xmxfp4", "cutlass_scaled_mm_fp8"]))["state"]
        == "fp4, fp8"
    )
    # a collective names the element type it moves (the shared A100 DDP trace's int8_t broadcast of
    # buffers): not a quantised model
    nccl = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    assert features.quantisation(pl.Series([nccl, "ampere_sgemm_128x64_nn"]))["state"] == "none seen"
    meta = {"source": "/x/run_tp4_pp2.json", "extra": {"with_stack": 1, "record_shapes": 0}}
    assert features.parallelism(meta)["state"] == "pp 2, tp 4"
    assert features.profiler_settings(meta)["state"] == "with_stack"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate")
    return {
        "base": write_serving_trace(d / "base.json", seed=1),
        "rerun": write_serving_trace(d / "rerun.json", seed=2),
        "plus1": write_serving_trace(d / "plus1.json", seed=3, decode_scale=1.01),
        "plus25": write_serving_trace(d / "plus25.json", seed=4, decode_scale=1.25),
        "prefix": write_serving_trace(d / "prefix.json", seed=5, prefill_name=PREFIX_PREFILL_NAME),
        "renamed": write_serving_trace(d / "renamed.json", seed=6, rename="forward_"),
        "no_decode": write_serving_trace(d / "no_decode.json", seed=7, decode_steps=0),
    }


def _gate_json(a: Path, b: Path, *extra: str) -> tuple[int, dict, str]:
    code, out, err = tk("diff", a, b, "--format", "json", "--gate", "5%", *extra)
    return code, json.loads(out), err


def _check(doc: dict, phase: str, metric: str, stat: str = "p50") -> dict:
    return next(c for c in doc["gate"]["checks"] if (c["phase"], c["metric"], c["stat"]) == (phase, metric, stat))


def test_cli_rerun_and_small_shift_pass(runs: dict[str, Path]) -> None:
    code, doc, _ = _gate_json(runs["base"], runs["rerun"])
    assert code == 0 and doc["gate"]["verdict"].startswith("gate: PASS")
    # a decode step: 10 µs launch lead + gemm 300 µs + attention 100 µs = 410 µs, each kernel ±3 %
    dec = _check(doc, "decode", "step time")
    assert dec["a"] == pytest.approx(410_000, rel=0.03) and abs(dec["change"]) < 0.02
    assert dec["samples_a"] == dec["samples_b"] == 40
    # the prefill is one step: 10 + 2,000 + 500 = 2,510 µs, tested on the threshold alone
    pre = _check(doc, "prefill", "step time")
    assert pre["a"] == pytest.approx(2_510_000, rel=0.03) and pre["ci_low"] is None
    # +1 % decode: 10 + 404 = 414 µs, +1.0 %: inside the gate
    code, doc, _ = _gate_json(runs["base"], runs["plus1"])
    assert code == 0
    assert _check(doc, "decode", "step time")["change"] == pytest.approx(0.0098, abs=0.015)


def test_cli_regression_fails_naming_decode(runs: dict[str, Path]) -> None:
    code, doc, err = _gate_json(runs["base"], runs["plus25"])
    # +25 % decode kernels: 10 + 500 = 510 µs a step against 410: +24.4 %, far past 5 % + noise
    assert code == 1
    dec = _check(doc, "decode", "step time")
    assert dec["change"] == pytest.approx(0.244, abs=0.02) and dec["ci_low"] > 0.2 and dec["regressed"]
    assert _check(doc, "decode", "gemm time", "sum")["regressed"]
    assert not _check(doc, "prefill", "step time")["regressed"]
    assert "gate: FAIL: decode step time p50 +2" in err


def test_cli_prefix_caching_is_not_comparable(runs: dict[str, Path]) -> None:
    code, doc, err = _gate_json(runs["base"], runs["prefix"])
    assert code == gate_mod.EXIT_NOT_COMPARABLE == 7
    assert "NOT COMPARABLE" in err and "prefix caching: no vs yes" in err
    fb = {r["feature"]: r for r in doc["features_b"]}
    assert fb["prefix caching"]["state"] == "yes" and "1,024 cached tokens" in fb["prefix caching"]["detail"]
    code, doc, _ = _gate_json(runs["base"], runs["prefix"], "--allow-feature-change")
    assert code == 0 and any("prefix caching: no vs yes" in n for n in doc["gate"]["notes"])
    # without --gate the diff lists both sides' features and exits 0
    text = tk_out("diff", runs["base"], runs["prefix"])
    assert "prefix caching" in text and "DIFFERS" in text


def test_cli_md_starts_with_the_verdict(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "d.md"
    assert tk("diff", str(runs["base"]), str(runs["plus25"]), "--gate", "5", "--format", "md", "-o", str(out)).code == 1
    text = out.read_text()
    first, rest = text.split("\n", 1)
    assert first.startswith("**gate: FAIL: decode step time p50") and len(text) < 65_536
    assert rest.index("## Phases that moved") < rest.index("## Operators that moved most") < rest.index("## Features")


def test_md_is_bounded_on_any_input() -> None:
    # 5,000 region kinds and 5,000 kernels with 3,000-character names: far over 65,536 characters
    # if all were printed; the comment stays under MAX_CHARS and says what it left out
    n, name = 5_000, "k" * 3_000
    long = pl.DataFrame(
        {
            "kind": [f"{name}{i}" for i in range(n)],
            "metric": ["span_ns"] * n,
            "a": [1.0] * n,
            "b": [2.0] * n,
            "delta": [1.0] * n,
            "change": [1.0] * n,
        }
    )
    moved = pl.DataFrame(
        {
            "name": [f"{name}{i}" for i in range(n)],
            "count_a": [1] * n,
            "count_b": [1] * n,
            "time_a_ns": [1] * n,
            "time_b_ns": [2] * n,
            "delta_ns": [1] * n,
            "change": [1.0] * n,
        }
    )
    d = Diff(
        "A" * 100_000,
        "B",
        long.rename({"kind": "phase"}),
        pl.DataFrame(
            schema={
                "phase": pl.String,
                "bound_a": pl.String,
                "bound_b": pl.String,
                "changed": pl.Boolean,
                "reason_a": pl.String,
                "reason_b": pl.String,
            }
        ),
        long,
        moved,
        moved,
    )
    text = render_md(d)
    assert len(text) < MAX_CHARS < 65_536
    assert "more rows left out" in text


def test_stratified_resampling_keeps_the_mix_of_step_kinds() -> None:
    # 20 draft steps of 50 and 20 verify steps of 400 a side, B's verify steps 1 % slower: the
    # decode total is 20·50 + 20·400 = 9,000 against 20·50 + 20·404 = 9,080, +0.89 %. Resampled
    # within each kind the total cannot move by more than that; resampled as one group it would
    # swing by tens of % with the draft/verify mix.
    values_a = [50.0] * 20 + [400.0] * 20
    values_b = [50.0] * 20 + [404.0] * 20
    kinds = ["step[DRAFT_EXTEND bs=N]"] * 20 + ["step[TARGET_VERIFY bs=N]"] * 20

    def side(values: list[float]) -> pl.DataFrame:
        return _samples("decode", values, "busy time", "sum").with_columns(pl.Series("stratum", kinds))

    r = gate_mod.gate(side(values_a), side(values_b), 0.05).checks.row(0, named=True)
    assert r["change"] == pytest.approx(80 / 9000)
    assert r["ci_low"] == pytest.approx(80 / 9000) and r["ci_high"] == pytest.approx(80 / 9000)


def test_sglang_speculative_modes_are_decode() -> None:
    from tracekit.labels.phases import sglang_columns

    names = pl.DataFrame({"name": ["step[TARGET_VERIFY bs=4 toks=16]", "step[DRAFT_EXTEND bs=4 toks=4]"]})
    got = names.select(**sglang_columns(pl.col("name")))
    assert got["phase"].to_list() == ["decode", "decode"] and got["tokens"].to_list() == [16, 4]


def test_speculative_split_and_diff(tmp_path: Path) -> None:
    # no jitter: 40 iterations of a draft step (gemm 40 + attention 10 = 50 µs busy) and a verify
    # step (300 + 100 = 400 µs): decode busy 40 · 450 µs = 18 ms, verify 16 ms (88.9 %), draft
    # 2 ms (11.1 %), 16 tokens per verify step (toks=16). B's draft kernels take twice as long:
    # draft 4 ms, decode busy 20 ms, draft share 20 %.
    a = write_serving_trace(tmp_path / "a.json", 1, jitter=0, speculative=True)
    b = write_serving_trace(tmp_path / "b.json", 1, jitter=0, speculative=True, draft_scale=2.0)
    spec = json.loads(tk_out("analyze", a, "--format", "json"))["totals"]["serving"]["speculative"][0]
    assert (spec["phase"], spec["verify_steps"], spec["draft_regions"]) == ("decode", 40, 40)
    assert (spec["verify_ns"], spec["draft_ns"], spec["tokens_per_verify"]) == (16_000_000, 2_000_000, 16.0)
    assert spec["draft_share"] == pytest.approx(2 / 18) and spec["verify_share"] == pytest.approx(16 / 18)
    code, doc, err = _gate_json(a, b)
    rows = {r["metric"]: r for r in doc["speculative"]}
    assert (rows["draft_ns"]["a"], rows["draft_ns"]["b"]) == (2_000_000, 4_000_000)
    assert rows["draft_share"]["b"] == pytest.approx(4 / 20)
    assert rows["verify_ns"]["delta"] == 0
    # the draft doubled (+100 %): the gate fails; the verify time did not move
    assert code == 1 and _check(doc, "decode", "draft time", "sum")["regressed"]
    assert not _check(doc, "decode", "verify time", "sum")["regressed"]


def test_cli_renamed_steps_and_a_lost_decode_are_not_comparable(runs: dict[str, Path]) -> None:
    # NEW's step annotations renamed: no phase rule reads them, so BASE's prefill and decode are
    # missing in NEW: exit 7 naming both, never "PASS (0 checks)"
    code, doc, err = _gate_json(runs["base"], runs["renamed"])
    assert code == 7 and doc["gate"]["exit_code"] == 7
    assert "BASE's prefill phase is missing in NEW; BASE's decode phase is missing in NEW" in err
    # NEW lost its whole decode phase (the prefill alone was traced): exit 7 naming it
    code, doc, err = _gate_json(runs["base"], runs["no_decode"])
    assert code == 7 and "BASE's decode phase is missing in NEW" in err
    assert "prefill phase is missing" not in err
    # no option makes a lost phase comparable
    assert _gate_json(runs["base"], runs["no_decode"], "--allow-feature-change")[0] == 7


def test_whole_trace_busy_and_span_are_always_gated(runs: dict[str, Path]) -> None:
    # one sample a side (the threshold alone); a re-run moves them by well under the 5 % gate
    code, doc, _ = _gate_json(runs["base"], runs["rerun"])
    busy, span = (_check(doc, "whole trace", m, "sum") for m in ("busy time", "span"))
    assert code == 0 and busy["samples_a"] == span["samples_a"] == 1 and busy["ci_low"] is None
    # base: prefill 2,500 µs + 40 decode steps of 400 µs = 18.5 ms of kernels (±3 % jitter)
    assert busy["a"] == pytest.approx(18_500_000, rel=0.03) and abs(busy["change"]) < 0.02
    # each of the 41 steps adds 10 µs of launch lead and 20 µs after its kernels: span ≈ busy + 41 · 30 µs
    assert span["a"] == pytest.approx(18_500_000 + 41 * 30_000, rel=0.03)
    # the +25 % decode run's whole-trace busy time: (2.5 + 1.25 · 16) / 18.5 − 1 = +21.6 %, regressed too
    code, doc, _ = _gate_json(runs["base"], runs["plus25"])
    assert code == 1 and _check(doc, "whole trace", "busy time", "sum")["change"] == pytest.approx(0.216, abs=0.02)
    assert _check(doc, "whole trace", "busy time", "sum")["regressed"]
