"""Every step-name form of docs/phases.md on a constructed trace (issue 26, "Done when"): the forms
not already covered by tests/test_steps_tail.py (vLLM detailed / native / native with sums; SGLang
EXTEND / DECODE / MIXED / IDLE, any case) and tests/test_regions.py. Here: SGLang's detailed form,
speculative TARGET_VERIFY / DRAFT_EXTEND, multi-token DECODE, ATOM, nested engine annotations,
and graph-capture / warm-up spans outside the phases."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from golden.kineto import kernel, launch, load, region
from tracekit.analysis import analyze
from tracekit.labels.regions import label_regions


def _by_name(df: pl.DataFrame) -> dict[str, dict[str, object]]:
    return {r["name"]: r for r in df.filter(pl.col("kind") == "user_annotation").to_dicts()}


SG_DETAILED = "step[EXTEND bs=2 toks=14721 c_sq=14721 c_sqsq=108745533 c_sqsk=108745533 c_sk=14721]"
SG_MIXED_DETAILED = "step[MIXED bs=2 c=1 g=1 c_sq=5 c_sk=8 c_sqsq=25 c_sqsk=40 g_sq=1 g_sk=12 g_sqsq=1 g_sqsk=12]"
SG_VERIFY = "step[TARGET_VERIFY bs=8]"
SG_DRAFT = "step[DRAFT_EXTEND bs=8]"
SG_MTP = "step[DECODE bs=64 g_sq=128 g_sqsq=256 g_sqsk=262144 g_sk=131072]"


def test_sglang_detailed_and_speculative_forms(tmp_path: Path) -> None:
    # detailed EXTEND: bs 2, toks 14721 → prefill, tokens = prefill_tokens = 14721;
    # detailed MIXED → mixed, batch 2; TARGET_VERIFY / DRAFT_EXTEND (speculative) → decode, batch 8;
    # DECODE with g_sq = 128 > bs = 64 (two tokens per sequence: MTP) → decode, batch 64.
    names = [SG_DETAILED, SG_MIXED_DETAILED, SG_VERIFY, SG_DRAFT, SG_MTP]
    tr = load(tmp_path, [region(n, 100 * i, 50) for i, n in enumerate(names)])
    r = _by_name(label_regions(tr))
    assert (r[SG_DETAILED]["phase"], r[SG_DETAILED]["batch"], r[SG_DETAILED]["prefill_tokens"]) == (
        "prefill",
        2,
        14721,
    )
    assert (r[SG_MIXED_DETAILED]["phase"], r[SG_MIXED_DETAILED]["batch"]) == ("mixed", 2)
    for n in (SG_VERIFY, SG_DRAFT):
        assert (r[n]["phase"], r[n]["batch"], r[n]["decode_seqs"]) == ("decode", 8, 8)
    assert (r[SG_MTP]["phase"], r[SG_MTP]["batch"], r[SG_MTP]["decode_seqs"]) == ("decode", 64, 64)
    # SGLang steps share one step family: numbered 0..4 by start
    assert [r[n]["step"] for n in names] == [0, 1, 2, 3, 4]


def test_capture_and_warmup_spans_stay_out_of_the_phases(tmp_path: Path) -> None:
    """vLLM's ``_dummy_run`` warm-up and capture labels (``capture_32_DECODE`` holds the word decode)
    get phase other; a region inside one inherits other; the real decode step is the only decode
    unit, so its 10 µs kernel is all the decode phase's device time."""
    step = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)"
    ev = [
        region("_dummy_run", 0, 100),
        region("capture_32_DECODE", 10, 50),
        region("capture_8192_draft_PIECEWISE", 70, 20),
        region("warm_inner", 12, 5),
        region(step, 200, 100),
        launch(20, 1),
        kernel("k_capture", 30, 20, 1),
        launch(210, 2),
        kernel("k_step", 220, 10, 2),
    ]
    tr = load(tmp_path, ev)
    r = _by_name(label_regions(tr))
    rule = "graph capture / warm-up (not a steady-state step)"
    for n in ("_dummy_run", "capture_32_DECODE", "capture_8192_draft_PIECEWISE"):
        assert (r[n]["phase"], r[n]["phase_rule"]) == ("other", rule)
    assert r["warm_inner"]["phase"] == "other"
    assert r[step]["phase"] == "decode"
    res = analyze(tr)
    dec = res.phases.filter(pl.col("phase") == "decode").row(0, named=True)
    assert dec["busy_ns"] == 10_000


ATOM_PREFILL = "prefill[bs=2 tok=14721 ctx=[7803, 6918]]"
ATOM_PREFILL_DETAILED = "prefill[bs=2 tok=14721 ctx=[7803, 6918] sqsq=108745533 sqsk=108745533 sk=14721]"
ATOM_DECODE_PADDED = "decode[bs=117/128 tok=117 d=117]"
ATOM_DECODE_SPEC = "decode[bs=32 tok=128 d=32 spec=3 sqsq=512 sqsk=262144 sk=65536]"


def test_atom_forms(tmp_path: Path) -> None:
    # prefill[bs=2 tok=14721 …] → prefill, batch 2, tokens = prefill_tokens = 14721 (native and
    # detailed); decode[bs=117/128 …] → decode, batch = decode_seqs = 117 (the real batch; 128 is
    # the CUDA-graph padding); decode[bs=32 tok=128 spec=3 …] → decode, batch 32, tokens 128.
    names = [ATOM_PREFILL, ATOM_PREFILL_DETAILED, ATOM_DECODE_PADDED, ATOM_DECODE_SPEC]
    tr = load(tmp_path, [region(n, 100 * i, 50) for i, n in enumerate(names)])
    r = _by_name(label_regions(tr))
    for n in (ATOM_PREFILL, ATOM_PREFILL_DETAILED):
        assert (r[n]["phase"], r[n]["batch"], r[n]["tokens"], r[n]["prefill_tokens"], r[n]["phase_rule"]) == (
            "prefill",
            2,
            14721,
            14721,
            "ATOM prefill[…]",
        )
    d = r[ATOM_DECODE_PADDED]
    assert (d["phase"], d["batch"], d["decode_seqs"], d["tokens"], d["phase_rule"]) == (
        "decode",
        117,
        117,
        117,
        "ATOM decode[…]",
    )
    s = r[ATOM_DECODE_SPEC]
    assert (s["phase"], s["batch"], s["tokens"]) == ("decode", 32, 128)
    assert [r[n]["step"] for n in names] == [0, 1, 2, 3]  # one step family


def test_nested_engine_annotations_counted_once(tmp_path: Path) -> None:
    """SGLang's step[EXTEND …] holding vLLM-style execute_… (the shared SGLang prefill trace has
    both): one phase unit, its 40 µs kernel counted once in the prefill phase, one step."""
    outer = "step[EXTEND bs=2 toks=64]"
    inner = "execute_64_context_2(sq64sk64sqsq2048sqsk2048)_generation_0(sq0sk0sqsq0sqsk0)"
    ev = [region(outer, 0, 200), region(inner, 5, 190), launch(10, 1), kernel("k", 20, 40, 1)]
    res = analyze(load(tmp_path, ev))
    pre = res.phases.filter(pl.col("phase") == "prefill").row(0, named=True)
    assert pre["busy_ns"] == 40_000 and pre["kernel_count"] == 1
    units = res.regions.filter(pl.col("is_unit"))
    assert units["name"].to_list() == [outer] and res.steps.height == 1
    assert res.totals["output_tokens"] == 2  # one token per sequence of the one step (bs=2)
