"""Option values that mean nothing (issue 28): ranges and finiteness checked at the CLI, and
``--phase-map`` compiled by the engine that evaluates it. Before: ``whatif --decode-workers
1000000000`` allocated without bound; ``--link-latency-us -5000``, ``--kv-bytes-per-token -1`` and
``--link-gbps nan`` were taken ("KV transfer -5 ms … disaggregation pays"); ``analyze --slo
ttft=nan`` reported 100 % goodput; look-around, back-references and ``a{99999999}`` passed
Python's ``re`` and failed in polars with a traceback, while ``\\p{Greek}`` (which polars takes)
was refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import tk

from kineto_events import kernel

GREEK = "βήμα"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Two regions named in Greek and Latin, one 5 µs kernel in each."""
    events = [kernel(0), kernel(1)]
    for i, name in enumerate([GREEK, "other"]):
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": 95 + 10 * i, "dur": 9}
        )
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    return p


def _invoke(*args: str) -> tuple[int, str]:
    """``tracekit ARGS``: (exit code, stdout + stderr)."""
    code, out, err = tk(*args)
    return code, out + err


@pytest.mark.parametrize(
    "option, value, why",
    [
        ("--decode-workers", "1000000000", "is not in the range 1<=x<=4096"),
        ("--prefill-workers", "0", "is not in the range 1<=x<=4096"),
        ("--link-latency-us", "-5000", "-5000 must be ≥ 0"),
        ("--kv-bytes-per-token", "-1", "-1 must be ≥ 0"),
        ("--link-gbps", "nan", "'nan' is not a finite number"),
        ("--link-gbps", "0", "0 must be ≥ 1e-09"),
        ("--link-gbps", "inf", "'inf' is not a finite number"),
        ("--link-efficiency", "nan", "'nan' is not a finite number"),
        ("--link-efficiency", "1.5", "1.5 must be ≤ 1"),
        ("--prefill-ms", "-1", "-1 must be ≥ 0"),
        ("--decode-steps", "-3", "is not in the range 0<=x<=1000000000"),
    ],
)
def test_whatif_options_are_checked_by_click(trace: Path, option: str, value: str, why: str) -> None:
    code, out = _invoke("whatif", str(trace), option, value)
    assert code == 2 and f"Invalid value for '{option}': " in out and why in out, out


@pytest.mark.parametrize("slo", ["ttft=nan", "tpot=inf", "e2el=-1", "ttft=0"])
def test_slo_must_be_positive_and_finite(trace: Path, slo: str) -> None:
    code, out = _invoke("analyze", str(trace), "--slo", slo)
    key, _, value = slo.partition("=")
    assert code != 0
    assert f"--slo: {key}={value} must be a positive, finite number of milliseconds" in out


@pytest.mark.parametrize(
    "regex, why",
    [
        ("(?=a)b", "look-around, including look-ahead and look-behind, is not supported"),
        ("(?<!a)b", "look-around, including look-ahead and look-behind, is not supported"),
        (r"(a)\1", "backreferences are not supported"),
        ("a{99999999}", "Compiled regex exceeds size limit of 10485760 bytes"),
        ("[", "unclosed character class"),
    ],
)
def test_phase_map_refused_by_the_engine_in_one_line(trace: Path, regex: str, why: str) -> None:
    code, out = _invoke("analyze", str(trace), "--phase-map", f"{regex}=decode")
    lines = out.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "Traceback" not in out
    assert lines[0] == f"tracekit: error: --phase-map {regex!r}: not a regular expression the matcher takes ({why})"


def test_phase_map_unicode_class_the_engine_takes(trace: Path, tmp_path: Path) -> None:
    """``\\p{Greek}`` (Python's ``re`` refuses it; polars takes it) names the Greek region decode:
    one decode region, the other region has no phase."""
    out = tmp_path / "a.json"
    code, text = _invoke(
        "analyze", str(trace), "--phase-map", r"^\p{Greek}+$=decode", "--format", "json", "-o", str(out)
    )
    assert code == 0, text
    regions = {r["name"]: r["phase"] for r in json.loads(out.read_text())["regions"]}
    assert regions[GREEK] == "decode" and regions["other"] != "decode"
