"""The one number formatter (tracekit/report/fmt.py) and the short kernel names (report/names.py)."""

from __future__ import annotations

from tracekit.report import fmt
from tracekit.report.names import short_name


def test_counts_are_integers_with_separators() -> None:
    # 1.563e+04 kernels was printed before: a count that arrives as a float is still a count
    assert fmt.value("kernel_count", 15630.0) == "15,630"
    assert fmt.value("regions_analyzed", 13513) == "13,513"
    assert fmt.count(1, "token") == "1 token" and fmt.count(2, "token") == "2 tokens"
    assert fmt.count(0, "step") == "0 steps" and fmt.count(1, "query", "queries") == "1 query"
    assert fmt.plural(1, "region") == "region" and fmt.plural(3, "region") == "regions"


def test_versions_flags_and_missing_values() -> None:
    assert fmt.value("cuda_runtime_version", 12040) == "12.4"  # not "12,040"
    assert fmt.value("cuda_driver_version", 12020) == "12.2"
    assert fmt.value("cupti_version", 24) == "24"
    assert fmt.value("format_version", "3.17.1") == "3.17.1"
    assert fmt.value("with_flops", 1) == "yes"  # not "1 FLOP"
    assert fmt.value("record_shapes", 0) == "no"
    assert fmt.value("conserved", True) == "yes"
    assert fmt.value("rank", None) == "–"  # not "None"


def test_si_prefixes_never_scientific_notation() -> None:
    assert fmt.si(1.23e12, "FLOP/s") == "1.23 TFLOP/s"
    assert fmt.value("achieved_bytes_per_s", 6.98e9) == "6.98 GB/s"
    assert fmt.value("intensity", 1.2e-5) == "0.000012 FLOP/B"
    assert fmt.value("ridge", 0.046) == "0.046 FLOP/B"
    assert "e" not in fmt.value("something", 12345678.9) and fmt.value("something", 12345678.9) == "12.35 M"
    assert fmt.plain(0.000012345, 3) == "0.0000123"


def test_shares_points_times_and_ranges() -> None:
    assert fmt.value("coverage", 0.9) == "90.0 %"
    assert fmt.pp(0.05) == "+5.0 pp" and fmt.pp(-0.123) == "-12.3 pp"
    assert fmt.change(0.25) == "+25.0 %"
    assert fmt.duration(2_500_000) == "2.5 ms" and fmt.duration(870) == "870 ns" and fmt.duration(2e9) == "2 s"
    assert fmt.ms(384_000) == "0.384 ms"  # one unit for a column that must read ms beside ms
    assert fmt.value_range(70, 70) == "70" and fmt.value_range(70, 76) == "70–76"
    assert fmt.slo({"ttft_ms": 200.0, "tpot_ms": 50}) == "TTFT ≤ 200 ms, TPOT ≤ 50 ms"
    assert fmt.ratio(2.37) == "2.4×" and fmt.value("spread", 2.37) == "2.4×"


def test_short_kernel_names() -> None:
    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
    )
    assert short_name(long) == "vectorized_elementwise_kernel<4, CUDAFunctor_add<BFloat16>>"
    cutlass = (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
        "(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)"
    )
    assert short_name(cutlass) == "cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
    lam = (
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
        "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>>(int, ...)"
    )
    assert short_name(lam) == "unrolled_elementwise_kernel<direct_copy_kernel_cuda, 4>"
    assert short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"  # fits: unchanged
    assert len(short_name("x" * 500)) == 60 and short_name("x" * 500).endswith("…")


def test_diff_share_deltas_in_percentage_points() -> None:
    from tracekit.report.sections.diff import delta

    # busy 60 % -> 65 %: B − A is +5.0 pp, not "5.0 %" (which would read as a relative change)
    assert delta("busy_ratio", 0.05) == "+5.0 pp"
    assert delta("coverage", -0.1) == "-10.0 pp"
    assert delta("span_ns", 2_500_000) == "2.5 ms"
