"""Region labelling: phases, rules, steps and attributes on tiny hand-made traces and on the real
engine annotations of the shared traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from conftest import kineto_trace_files
from golden.kineto import gpu_region, kernel, launch, load, op, region
from tracekit.errors import UsageError
from tracekit.labels.phases import PHASES, parse_phase_map
from tracekit.labels.regions import infer_phase_from_shapes, label_regions

SG_EXTEND = "step[EXTEND bs=15 toks=15360]"
SG_DECODE = "step[DECODE bs=32]"
VLLM_PREFILL = "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0(sq0sk0sqsq0sqsk0)"
VLLM_DECODE = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)"
VLLM_MIXED = "execute_40_context_2(sq8sk8sqsq32sqsk32)_generation_32(sq32sk3200sqsq32sqsk3200)"


def _by_name(df: pl.DataFrame) -> dict[str, dict[str, object]]:
    return {r["name"]: r for r in df.filter(pl.col("kind") == "user_annotation").to_dicts()}


def test_tk_names_attributes_and_inheritance(tmp_path: Path) -> None:
    # tk:run (a container, no phase) ⊃ prefill step 0 ⊃ "sampling"; decode steps 1 and 2.
    # "sampling" has no phase of its own → inherits prefill from its parent, and says so.
    pre = "tk:prefill step=0 batch=4 prompt_tokens=512 ctx=512"
    tr = load(
        tmp_path,
        [
            region("tk:run workload=llm", 0, 1000),
            region(pre, 10, 100),
            region("sampling", 90, 10),
            region("tk:decode step=1 batch=4 ctx=513", 200, 50),
            region("tk:decode step=2 batch=4 ctx=514", 300, 50),
            region("tk:mixed step=3 prefill_tokens=256 decode_seqs=6", 400, 50),
        ],
    )
    r = _by_name(label_regions(tr))
    assert r[pre]["phase"] == "prefill" and r[pre]["phase_rule"] == "tk: annotation tk:prefill"
    assert (r[pre]["step"], r[pre]["batch"], r[pre]["ctx"], r[pre]["prompt_tokens"]) == (0, 4, 512, 512)
    assert r["sampling"]["phase"] == "prefill" and r["sampling"]["phase_rule"] == f'inherited from "{pre}"'
    d2 = r["tk:decode step=2 batch=4 ctx=514"]
    assert (d2["phase"], d2["step"], d2["ctx"]) == ("decode", 2, 514)
    m = r["tk:mixed step=3 prefill_tokens=256 decode_seqs=6"]
    assert (m["phase"], m["prefill_tokens"], m["decode_seqs"]) == ("mixed", 256, 6)
    run = r["tk:run workload=llm"]
    assert run["phase"] == "other" and run["phase_rule"] == "no phase rule matched"
    assert run["attrs"] == '{"workload": "llm"}'


def test_engine_conventions(tmp_path: Path) -> None:
    # SGLang: EXTEND → prefill (bs 15, toks 15360); DECODE → decode (bs 32 decode sequences).
    # vLLM: context 15 / generation 0 → prefill, ctx = sk 15360 // 15 requests = 1024;
    #       context 0 / generation 32 → decode, ctx = 55086 // 32 = 1721 (kv_tokens 55086);
    #       context 2 / generation 32 → mixed, batch 34, kv 8 + 3200 = 3208, ctx 3208 // 34 = 94.
    tr = load(
        tmp_path,
        [
            region(n, 100 * i, 50)
            for i, n in enumerate(
                [SG_EXTEND, SG_DECODE, VLLM_PREFILL, VLLM_DECODE, VLLM_MIXED, "MyDecodeLoop", "prefill_and_decode"]
            )
        ],
    )
    r = _by_name(label_regions(tr))
    assert (r[SG_EXTEND]["phase"], r[SG_EXTEND]["batch"], r[SG_EXTEND]["tokens"], r[SG_EXTEND]["prefill_tokens"]) == (
        "prefill",
        15,
        15360,
        15360,
    )
    assert (r[SG_DECODE]["phase"], r[SG_DECODE]["batch"], r[SG_DECODE]["decode_seqs"]) == ("decode", 32, 32)
    assert r[SG_DECODE]["phase_rule"] == "SGLang step[DECODE …]"
    assert (r[VLLM_PREFILL]["phase"], r[VLLM_PREFILL]["tokens"], r[VLLM_PREFILL]["batch"], r[VLLM_PREFILL]["ctx"]) == (
        "prefill",
        15360,
        15,
        1024,
    )
    assert (
        r[VLLM_DECODE]["phase"],
        r[VLLM_DECODE]["ctx"],
        r[VLLM_DECODE]["kv_tokens"],
        r[VLLM_DECODE]["decode_seqs"],
    ) == ("decode", 1721, 55086, 32)
    assert (r[VLLM_MIXED]["phase"], r[VLLM_MIXED]["batch"], r[VLLM_MIXED]["kv_tokens"], r[VLLM_MIXED]["ctx"]) == (
        "mixed",
        34,
        3208,
        94,
    )
    assert r[VLLM_MIXED]["phase_rule"] == "vLLM execute_…: 2 context, 32 generation requests"
    assert (r["MyDecodeLoop"]["phase"], r["MyDecodeLoop"]["phase_rule"]) == ("decode", 'name contains "decode"')
    assert r["prefill_and_decode"]["phase"] == "mixed"
    # SGLang steps are numbered together by order of occurrence (EXTEND at 0 µs, DECODE at 100 µs).
    assert (r[SG_EXTEND]["step"], r[SG_DECODE]["step"]) == (0, 1)


def test_steps_numbered(tmp_path: Path) -> None:
    # ProfilerStep#7/#8 carry their number; three "fwd" regions are numbered 0, 1, 2 by start time,
    # and the gpu_user_annotation projection of ProfilerStep#8 gets 8 too.
    tr = load(
        tmp_path,
        [
            region("ProfilerStep#7", 0, 100),
            region("ProfilerStep#8", 100, 100),
            gpu_region("ProfilerStep#8", 150, 60),
            region("fwd", 10, 5),
            region("fwd", 110, 5),
            region("fwd", 120, 5),
        ],
    )
    df = label_regions(tr)
    fwd = df.filter(pl.col("name") == "fwd").sort("start_ns")
    assert fwd["step"].to_list() == [0, 1, 2]
    ps = df.filter(pl.col("name").str.starts_with("ProfilerStep")).sort("start_ns")
    assert ps.select("kind", "step").rows() == [
        ("user_annotation", 7),
        ("user_annotation", 8),
        ("gpu_user_annotation", 8),
    ]
    assert df["region_id"].to_list() == sorted(tr.regions["region_id"].to_list())  # one row per region


def test_phase_map_wins_first_match(tmp_path: Path) -> None:
    # User rules come before every built-in: "EXTEND" → decode overrides SGLang's prefill; for
    # SG_DECODE the first rule that matches ("step" → prefill) wins over the later "DECODE" rule.
    tr = load(tmp_path, [region(SG_EXTEND, 0, 10), region(SG_DECODE, 20, 10), region("warmup", 40, 10)])
    r = _by_name(label_regions(tr, phase_map=["EXTEND=decode", r"^step\[D=prefill", "DECODE=decode"]))
    assert (r[SG_EXTEND]["phase"], r[SG_EXTEND]["phase_rule"]) == ("decode", "--phase-map EXTEND=decode")
    assert r[SG_DECODE]["phase"] == "prefill"
    assert r["warmup"]["phase"] == "other"


@pytest.mark.parametrize("bad", ["noequals", "x=warmup", "(=decode", "=decode"])
def test_bad_phase_map(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_phase_map([bad])


def test_phase_map_regex_with_equals() -> None:
    # The split is at the last "=": the regex keeps its own "=".
    assert parse_phase_map(["bs=1\\b=decode"]) == [("bs=1\\b", "decode")]


def _sdpa(tmp_path: Path, qlens: list[int]) -> pl.DataFrame:
    ev: list[dict[str, object]] = []
    for i, q in enumerate(qlens):
        # query [B=4, H=8, N_Q=q, d=64], key/value [4, 8, 100, 64]
        ev.append(
            op("aten::scaled_dot_product_attention", 10 * i, 5, dims=[[4, 8, q, 64], [4, 8, 100, 64], [4, 8, 100, 64]])
        )
        ev.append(
            op(
                "aten::_scaled_dot_product_flash_attention",
                10 * i + 1,
                3,
                dims=[[4, 8, q, 64], [4, 8, 100, 64], [4, 8, 100, 64]],
            )
        )
    ev += [launch(1, corr=1), kernel("k", 2, 1, corr=1)]
    return infer_phase_from_shapes(load(tmp_path, ev))


@pytest.mark.parametrize(
    ("qlens", "phase", "rule"),
    [
        ([1, 1, 1], "decode", "inferred from shapes: attention query length 1 (3 attention calls)"),
        ([128, 100], "prefill", "inferred from shapes: attention query length 100–128 > 1 (2 attention calls)"),
        ([1, 128], "mixed", "inferred from shapes: attention query length 1 in 1 of 2 attention calls"),
        ([], "other", "no attention op with Input Dims: phase not inferred from shapes"),
    ],
)
def test_infer_phase_from_shapes(tmp_path: Path, qlens: list[int], phase: str, rule: str) -> None:
    # Only the outermost SDPA op of each call counts (the nested flash op is the same call).
    out = _sdpa(tmp_path, qlens)
    assert out.height == 1 and out["phase"][0] == phase and out["phase_rule"][0] == rule
    assert out["attention_ops"][0] == len(qlens)


def test_shapes_on_real_prefill_trace(shared_traces: Path) -> None:
    # tracelens h100 Qwen: one prefill-shaped forward, batch 16 × 559 tokens; 24 layers → 24 SDPA
    # calls, all with query length 559.
    tr = tracekit.load(str(shared_traces / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    out = infer_phase_from_shapes(tr).row(0, named=True)
    assert (out["phase"], out["attention_ops"], out["query_len_min"], out["query_len_max"]) == ("prefill", 24, 559, 559)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (
            "sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
            {"step[EXTEND bs=15 toks=15360]": "prefill", VLLM_PREFILL: "prefill"},
        ),
        ("sglang_decode/sglang_Qwen3-8B_decode.json.gz", {"step[DECODE bs=32]": "decode"}),
        ("vllm_decode_full/graph_execution.json.gz", {VLLM_DECODE: "decode"}),
    ],
)
def test_real_engine_names(shared_traces: Path, rel: str, expected: dict[str, str]) -> None:
    # The annotation names listed in the shared traces' README parse to the phases they describe.
    tr = tracekit.load(str(shared_traces / "kineto/tracelens/inference" / rel))
    got = dict(label_regions(tr).select("name", "phase").iter_rows())
    for name, phase in expected.items():
        assert got[name] == phase


@pytest.mark.parametrize(
    "path", [p for p in kineto_trace_files() if p.stat().st_size < 2_000_000], ids=lambda p: p.name
)
def test_labels_complete_on_real_traces(shared_traces: Path, path: Path) -> None:
    # Every region gets exactly one row, a known phase, a rule and a step.
    tr = tracekit.load(str(path))
    df = label_regions(tr)
    assert df.height == tr.regions.height
    assert df["phase"].is_in(list(PHASES)).all()
    assert df["phase_rule"].null_count() == 0 and df["step"].null_count() == 0


def test_decoder_is_a_model_part_not_the_decode_phase() -> None:
    # Real names from the HTA trace_filter traces: "## decoder fp8 None ##" is a recsys tower.
    import polars as pl

    from tracekit.labels.phases import keyword_phase

    names = pl.DataFrame({"n": ["## decoder fp8 None ##", "MyDecodeLoop", "decode", "prefill_decode", "Encoder"]})
    got = names.select(keyword_phase(pl.col("n")).alias("p"))["p"].to_list()
    assert got == [None, "decode", "decode", "mixed", None]


def test_attention_query_lengths_without_attention_ops(shared_traces: Path) -> None:
    # nccl_data has no SDPA or flash-attention op: the empty answer comes without the shapes
    # query, with the columns and dtypes the shapes query gives.
    import tracekit
    from tracekit.labels.regions import attention_query_lengths

    ops = tracekit.load(str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz")).ops
    got = attention_query_lengths(ops)
    want = {"op_id": pl.Int64(), "name": pl.String(), "batch": pl.Int64(), "query_len": pl.Int64()}
    assert got.height == 0 and dict(got.schema) == want
