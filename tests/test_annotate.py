"""tracekit.annotate: the tk: naming convention and the phase() context manager / decorator."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tracekit.annotate import format_phase_name, parse_phase_name, phase
from tracekit.errors import UsageError


def test_format_matches_convention() -> None:
    assert (
        format_phase_name("prefill", step=0, batch=4, prompt_tokens=512, ctx=512)
        == "tk:prefill step=0 batch=4 prompt_tokens=512 ctx=512"
    )
    assert (
        format_phase_name("mixed", step=3, prefill_tokens=256, decode_seqs=6)
        == "tk:mixed step=3 prefill_tokens=256 decode_seqs=6"
    )
    assert format_phase_name("run", workload="llm", warm=False) == "tk:run workload=llm warm=false"


def test_parse_round_trip_and_values_are_strings() -> None:
    name = format_phase_name("decode", step=17, batch=4, ctx=530)
    assert parse_phase_name(name) == {"phase": "decode", "step": "17", "batch": "4", "ctx": "530"}
    assert parse_phase_name("tk:run") == {"phase": "run"}


@pytest.mark.parametrize(
    "name",
    [
        "ProfilerStep#3",
        "step[DECODE bs=32]",
        "tk:",
        "tk: step=1",
        "tk:decode step",
        "tk:decode step=",
        "tk:decode step=1 step=2",
        "tk:decode 1x=2",
        "tk:decode a=b=c",
        "xtk:decode step=1",
    ],
)
def test_parse_rejects_foreign_or_malformed(name: str) -> None:
    assert parse_phase_name(name) is None


@pytest.mark.parametrize(
    "phase_name,attrs",
    [
        ("two words", {}),
        ("decode", {"bad key": 1}),
        ("decode", {"k": "a b"}),
        ("decode", {"k": "a=b"}),
        ("decode", {"k": ""}),
    ],
)
def test_format_refuses_unparseable(phase_name: str, attrs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        format_phase_name(phase_name, **attrs)


def test_import_tracekit_annotate_does_not_import_torch() -> None:
    code = (
        "import sys, tracekit, tracekit.annotate, tracekit.cli.main, tracekit.cli.run, tracekit.workloads.config, "
        "tracekit.workloads.scheduler, tracekit.workloads.flops, tracekit.workloads.sidecar\n"
        "tracekit.annotate.parse_phase_name('tk:decode step=1')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_phase_records_same_name_in_profiler_and_nvtx(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    import tracekit.annotate as A

    pushed: list[str] = []
    rt = A._runtime()
    monkeypatch.setattr(rt, "nvtx_push", pushed.append)
    monkeypatch.setattr(rt, "nvtx_pop", lambda: pushed.append("<pop>"))

    @phase("run", workload="t")
    def work() -> None:
        with phase("decode", step=1, ctx=5):
            torch.ones(4).add_(1)

    work()  # no profiler: only NVTX
    assert pushed == ["tk:run workload=t", "tk:decode step=1 ctx=5", "<pop>", "<pop>"]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        work()
    names = [e.name for e in prof.events() if e.name.startswith("tk:")]
    assert sorted(names) == ["tk:decode step=1 ctx=5", "tk:run workload=t"]
    assert len(pushed) == 8


def test_phase_is_reentrant_and_closes_on_error() -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    p = phase("decode", step=0)
    with profile():
        with p:
            with p:
                assert len(p._stack) == 2  # one handle per entry
                torch.zeros(1)
    assert p._stack == []
    with profile() as prof:
        with pytest.raises(RuntimeError):
            with p:
                raise RuntimeError("boom")
        torch.zeros(1)
    assert p._stack == []
    # the range was closed by the exception: the later op is not inside it
    assert [e.name for e in prof.events() if e.name.startswith("tk:")] == ["tk:decode step=0"]
    ev = next(e for e in prof.events() if e.name.startswith("tk:"))
    assert not any(c.name == "aten::zeros" for c in ev.cpu_children)
