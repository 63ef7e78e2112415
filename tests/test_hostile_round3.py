"""Hostile input, round 3 (issue 37): model configs, capture folders, FIFOs and devices, lock
files, ranks, what-if values, stored results, Markdown to post, exit codes. One constructed input
per class; each asserts the exit code and a one-line message (docs/robustness.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import piecewise_trace as P
from cli_run import tk, tk_out, tk_process
from kineto_events import KERNEL

TRACE_EVENTS = {"traceEvents": [KERNEL]}
GOOD_MODEL = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 128}


def _trace(tmp_path: Path, name: str = "run.pt.trace.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(TRACE_EVENTS))
    return p


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------ item 1: one opener
def _fifo(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("where", ["trace", "ingest", "capture", "model", "hardware", "partition"])
def test_fifo_is_refused_not_waited_on(tmp_path: Path, where: str) -> None:
    """A FIFO given as any input ends in one line at once (it used to block the reader forever)."""
    trace = _trace(tmp_path)
    fifo_json = tmp_path / "f.json"
    args: list[str | Path]
    if where == "trace":
        args, code = ["summary", _fifo(tmp_path, "f.json")], 3
    elif where == "ingest":
        args, code = ["ingest", _fifo(tmp_path, "f.json"), "--out", tmp_path / "ds"], 3
    elif where == "capture":  # a capture file is left out with a warning; the trace is analysed
        args, code = ["analyze", trace, "--capture", _fifo(tmp_path, "f.json"), "--format", "json"], 0
    elif where == "model":
        args, code = ["analyze", trace, "--model", _fifo(tmp_path, "f.json")], 2
    elif where == "hardware":
        args, code = ["analyze", trace, "--hardware", _fifo(tmp_path, "f.json")], 2
    else:
        ds = tmp_path / "ds"
        tk_out("ingest", trace, "--out", ds)
        part = next((ds / "ops").glob("trace_id=*/data.parquet"))
        part.unlink()
        os.mkfifo(part)
        args, code = ["summary", ds], 4
    r = tk_process(*args, timeout=20)
    assert r.returncode == code, (r.returncode, r.stderr)
    if code:
        assert "not a regular file" in _one_line(r.stderr) and "FIFO" in r.stderr
    else:
        doc = json.loads(r.stdout)
        warns = doc["totals"]["warnings"]
        assert any("capture: 1 capture file(s) left out" in w and str(fifo_json) in w for w in warns)


def test_device_link_is_refused(tmp_path: Path) -> None:
    """A symlink to /dev/zero as --model or --hardware: refused before reading (it used to read
    until memory ran out)."""
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for opt in ("--model", "--hardware"):
        code, _, err = tk("analyze", _trace(tmp_path), opt, zero)
        assert code == 2 and "is a character device, not a regular file" in _one_line(err)


def test_lock_file_symlink_is_not_followed(tmp_path: Path) -> None:
    """A planted ``.lock-<id>`` symlink: ingest refuses in one line and never creates its target."""
    trace = _trace(tmp_path)
    ds = tmp_path / "ds"
    tk_out("ingest", trace, "--out", ds)
    tid = next((ds / "meta").glob("trace_id=*")).name.split("=", 1)[1]
    lock = ds / f".lock-{tid}"
    lock.unlink()
    target = tmp_path / "created-by-ingest"
    lock.symlink_to(target)
    code, _, err = tk("ingest", trace, "--out", ds, "--force")
    assert code == 3 and "writer lock" in _one_line(err) and "symbolic link" in err  # ingest: inputs failed
    assert not target.exists()
    lock.unlink()
    os.mkfifo(lock)
    r = tk_process("ingest", trace, "--out", ds, "--force", timeout=20)
    assert r.returncode == 3 and "not a regular file" in _one_line(r.stderr)


# ------------------------------------------------------------------ item 2: model configs
@pytest.mark.parametrize(
    "text,why",
    [
        ("[" * 4000, "model config is nested too deeply to read"),
        ('{"hidden_size": 1' + "0" * 309 + "}", "hidden_size must be an integer from 1 to 2147483647"),
        ('{"hidden_size": 1e309}', "hidden_size must be an integer from 1 to 2147483647, not Infinity"),
        ('{"hidden_size": 1' + "0" * 5000 + "}", "model config holds a number too large to read"),
        ('{"hidden_size": 64, "num_attention_heads": 128}', "is more than hidden_size 64"),
        ('{"hidden_size": 64, "head_dim": 0}', "head_dim must be an integer from 1"),
        (" " * (1 << 20) + "{}", "model config is larger than 1 MiB"),
    ],
)
def test_bad_model_config_in_every_command(tmp_path: Path, text: str, why: str) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(text)
    trace = _trace(tmp_path)
    cmds: list[list[str | Path]] = [["analyze", trace], ["ingest", trace, "--out", tmp_path / "ds"], ["report", trace]]
    for cmd in cmds:
        code, _, err = tk(*cmd, "--model", cfg)
        assert code == 2 and why in _one_line(err) and str(cfg) in err
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").glob("meta/trace_id=*"))


def test_head_dim_never_zero(tmp_path: Path) -> None:
    from tracekit.sources.model_config import read_model_config

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(GOOD_MODEL))
    assert read_model_config(cfg)["head_dim"] == 16


# ------------------------------------------------------------------ item 4: capture folders
def _capture_case(tmp_path: Path) -> tuple[Path, Path]:
    path = P.write_case(tmp_path, 5)
    return path, tmp_path / "capture_traces"


def _warnings(path: Path) -> list[str]:
    return list(json.loads(tk_out("analyze", path, "--format", "json"))["totals"]["warnings"])


@pytest.mark.parametrize("damage", ["empty", "cut", "not_json"])
def test_bad_capture_file_is_left_out(tmp_path: Path, damage: str) -> None:
    """A stray empty .json, a capture cut short, a file that is no JSON: that capture is left out
    with a warning naming it; the other capture and the trace are read."""
    path, cap = _capture_case(tmp_path)
    bad = cap / "graph_capture_rank_0.4096.pt.trace.json.gz"
    raw = bad.read_bytes()
    bad.write_bytes({"empty": b"", "cut": raw[: len(raw) // 2], "not_json": b"\x1b]52;c;AAAA\x07 secret"}[damage])
    warns = _warnings(path)
    left = [w for w in warns if w.startswith("capture: 1 capture file(s) left out")]
    assert len(left) == 1 and str(bad) in left[0] and "secret" not in left[0] and "\x1b" not in left[0]
    assert not any("not mapped" in w for w in warns)  # the 8192 capture still maps every replay


def test_huge_batch_size_is_ignored(tmp_path: Path) -> None:
    path, cap = _capture_case(tmp_path)
    listed = json.loads((cap / "execution_details.json").read_text())
    listed[0]["batch_size"] = 2**63
    (cap / "execution_details.json").write_text(json.dumps(listed))
    code, out, err = tk("analyze", path, "--format", "json")
    assert code == 0, err


@pytest.mark.parametrize("damage,why", [("deep", "is nested too deeply to read"), ("fifo", "is a FIFO")])
def test_bad_execution_details_is_left_out(tmp_path: Path, damage: str, why: str) -> None:
    path, cap = _capture_case(tmp_path)
    details = cap / "execution_details.json"
    if damage == "deep":
        details.write_text("[" * 2000)
    else:
        details.unlink()
        os.mkfifo(details)
    r = tk_process("analyze", path, "--format", "json", timeout=60)
    assert r.returncode == 0, r.stderr
    warns = json.loads(r.stdout)["totals"]["warnings"]
    assert any(f"execution_details.json {why}" in w and "; left out" in w for w in warns), warns


def test_details_file_entries_are_confined(tmp_path: Path) -> None:
    """``file`` entries naming ../.., an absolute path or a link out of the folder are not read
    (another trace named there used to be merged silently; a file's first bytes printed)."""
    path, cap = _capture_case(tmp_path)
    secret = tmp_path / "env"
    secret.write_text("AWS_SECRET=hunter2")
    (cap / "out.json").symlink_to(secret)
    listed = json.loads((cap / "execution_details.json").read_text())
    listed += [{"file": "../env", "batch_size": 1}, {"file": str(secret), "batch_size": 2}, {"file": "out.json"}]
    (cap / "execution_details.json").write_text(json.dumps(listed))
    warns = _warnings(path)
    assert any("3 " in w and "entries naming a file outside" in w for w in warns), warns
    assert not any("hunter2" in w for w in warns)


# ------------------------------------------------------------------ item 3: exit codes
def test_internal_error_has_its_own_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception tracekit did not raise on purpose (a bug) exits 70, never 1 (the gate's
    regression code); a polars panic (a BaseException) too."""
    import tracekit.cli.main as m

    for exc in (ZeroDivisionError("boom\nsecond line"), BaseException("panic")):

        def boom(*a: object, _e: BaseException = exc, **k: object) -> None:
            raise _e

        monkeypatch.setattr(m.cli, "main", boom)
        code, _, err = tk("--version")
        assert code == 70 and "internal error" in _one_line(err) and "second line" not in err


def test_polars_threads_zero_is_a_usage_error(tmp_path: Path) -> None:
    r = tk_process("summary", _trace(tmp_path), env={"POLARS_MAX_THREADS": "0"}, timeout=60)
    assert r.returncode == 2 and "POLARS_MAX_THREADS" in _one_line(r.stderr)


@pytest.mark.parametrize("cmd", ["analyze", "report", "summary", "diff"])
def test_output_equal_to_an_input_is_refused(tmp_path: Path, cmd: str) -> None:
    trace = _trace(tmp_path, "run.json")
    before = trace.read_bytes()
    extra = ["--format", "md"] if cmd == "report" else [trace] if cmd == "diff" else []
    code, _, err = tk(cmd, trace, *extra, "-o", trace, "--force")
    assert code == 2 and "is an input of this command" in _one_line(err)
    assert trace.read_bytes() == before
    ds = tmp_path / "ds"
    tk_out("ingest", trace, "--out", ds)
    code, _, err = tk(cmd, ds, *extra, "-o", ds / "meta" / "x.md", "--force")
    assert code == 2 and "is an input of this command" in _one_line(err)


def test_ingest_failure_is_not_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "cut.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": ')
    code, _, err = tk("ingest", bad, "--out", tmp_path / "ds")
    assert code == 3 and "1 of 1 inputs failed" in _one_line(err)


# ------------------------------------------------------------------ item 5: ranks
@pytest.mark.parametrize(
    "name,dist,dropped",
    [
        ("run.pt.trace.json", {"rank": 2**70, "world_size": 2**70}, "world_size 1180591620717411303424"),
        ("run.pt.trace.json", {"rank": -1, "world_size": 2}, "rank -1"),
        ("run.pt.trace.json", {"rank": 3, "world_size": 2}, "rank 3 of world size 2"),
        ("run.pt.trace.json", {"rank": "\uff11", "world_size": 2}, None),  # a full-width 1: no rank
        ("dp0_pp0_tp0_ep0_rank" + "9" * 25 + ".1.pt.trace.json", None, "file name rank"),
        ("x-TP-9223372036854775808.trace.json", None, "file name tp rank 9223372036854775808"),
        ("rank\uff13.1.pt.trace.json", None, None),  # full-width 3: not an engine name at all
    ],
)
def test_rank_out_of_range_is_null_and_counted(tmp_path: Path, name: str, dist: object, dropped: str | None) -> None:
    p = tmp_path / name
    p.write_text(json.dumps({**({"distributedInfo": dist} if dist else {}), **TRACE_EVENTS}))
    ds = tmp_path / "ds"
    code, out, err = tk("ingest", p, "--out", ds)
    assert code == 0, err
    for target in (p, ds):  # the trace and the dataset: analyze and report end well
        code, out, err = tk("analyze", target, "--format", "json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["trace"]["rank"] is None
        warns = [w for w in doc["totals"]["warnings"] if "rank value(s) out of range dropped" in w]
        assert (len(warns) == 1 and dropped in warns[0]) if dropped else not warns, warns
        assert tk("report", target, "--format", "md").code == 0


# ------------------------------------------------------------------ item 6: what-if values
def test_whatif_values_stay_finite(tmp_path: Path) -> None:
    from test_whatif import _serve

    trace = _serve(tmp_path)
    for bad in ("poisson:1e-320", "poisson:1e300", "interval:1e308"):
        code, _, err = tk("whatif", trace, "--arrival", bad, "--format", "json")
        assert code == 2 and "Invalid value for '--arrival'" in err and "Traceback" not in err, (bad, err)
    code, out, err = tk("whatif", trace, "--arrival", "poisson:1e-6", "--format", "json")
    assert code == 0 and "NaN" not in out and "Infinity" not in out, err
    for opt, value in (("--decode-steps", "1" + "0" * 309), ("--decode-steps", "1e309"), ("--link-gbps", "1e-320")):
        code, _, err = tk("whatif", "--prefill-ms", "10", "--tpot-ms", "5", "--decode-steps", "10", opt, value)
        assert code == 2 and f"Invalid value for '{opt}'" in err and "Traceback" not in err, (opt, err)


# ------------------------------------------------------------------ item 7: stored results
def _entry_doc(doc: bytes) -> bytes:
    import hashlib

    return doc + json.dumps({"size": len(doc), "blake2b": hashlib.blake2b(doc, digest_size=16).hexdigest()}).encode()


def _tamper(entry: Path, how: str) -> None:
    raw = entry.read_bytes()
    head, _, rest = raw.partition(b"\n")
    cut = rest.rfind(b"\n") + 1
    doc = rest[:cut]
    check = json.loads(head)
    if how.startswith("check:"):  # a field of the check line retyped
        field, value = how[6:].split("=", 1)
        check[field] = json.loads(value)
        entry.write_bytes(json.dumps(check).encode() + b"\n" + rest)
    elif how == "deep_check":
        entry.write_bytes(b"[" * 100_000 + b"\n" + rest)
    elif how == "deep_trailer":
        entry.write_bytes(head + b"\n" + doc + b"[" * 100_000)
    elif how == "dev_zero":
        entry.unlink()
        entry.symlink_to("/dev/zero")
    elif how == "fifo":
        entry.unlink()
        os.mkfifo(entry)
    elif how == "sparse":
        with open(entry, "r+b") as fh:
            fh.truncate(2 << 30)  # 2 GiB, sparse: never read whole
    elif how == "osc52":  # a replaced document, its trailer recomputed
        evil = doc.replace(b'"version"', b'"\x1b]52;c;ZWNobyBwd25lZA==\x07version"', 1)
        entry.write_bytes(head + b"\n" + _entry_doc(evil))
    elif how == "not_the_schema":
        entry.write_bytes(head + b"\n" + _entry_doc(b'{"regions": 5}\n'))
    elif how == "array":
        entry.write_bytes(head + b"\n" + _entry_doc(b"[1, 2]\n"))


TAMPER = [
    "check:source=5",
    "check:source={}",
    "check:sidecar=7",
    "check:key=[]",
    "deep_check",
    "deep_trailer",
    "dev_zero",
    "fifo",
    "sparse",
    "osc52",
    "not_the_schema",
    "array",
]


@pytest.mark.parametrize("how", TAMPER)
def test_tampered_stored_result_is_a_miss(tmp_path: Path, how: str) -> None:
    ds = tmp_path / "ds"
    tk_out("ingest", _trace(tmp_path), "--out", ds)
    fresh = tk_out("analyze", ds, "--format", "json")
    text = tk_out("analyze", ds)
    for fmt, want in (("json", fresh), ("text", text)):
        (entry,) = (ds / "analysis_results").glob("trace_id=*/*.json")  # stored again after a miss
        _tamper(entry, how)
        r = tk_process("analyze", ds, "--format", fmt, timeout=60)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert r.stdout == want and "\x1b" not in r.stdout


# ------------------------------------------------------------------ item 8: Markdown to post
def test_markdown_mentions_references_and_urls_are_neutralised(tmp_path: Path) -> None:
    """A kernel named to ping people or link elsewhere, in the PR comment (diff --format md) and the
    report: no @mention, #reference or bare URL GitHub would act on; the text reads the same."""
    import re

    evil = "gemm @user cc @org/team fixes #123 see https://evil.example/x www.evil.example"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for p, dur in ((a, 5), (b, 7)):
        p.write_text(json.dumps({"traceEvents": [{**KERNEL, "name": evil, "dur": dur}]}))
    for args in (("diff", a, b, "--format", "md"), ("report", a, "--format", "md"), ("analyze", a, "--format", "md")):
        code, out, err = tk(*args)
        assert code == 0, err
        if args[0] != "analyze":  # (analyze lists regions, not kernels)
            assert "@&#8203;user" in out and "https:&#8203;//evil" in out and "#&#8203;123" in out
        active = re.findall(r"@[A-Za-z0-9]|(?<!&)#[0-9]|https?://|(?<![A-Za-z0-9])www\.", out)
        assert not active, (args[0], active)


# ------------------------------------------------------------------ item 9: two runs of one job
def test_two_runs_of_one_job_are_kept_apart(tmp_path: Path) -> None:
    """Two runs of a 2-rank job with the same file names, in two folders, ingested together: each
    job holds the ranks of one run (they used to be filled in trace-id order, a content hash: each
    job held ranks of both runs and the slower run's rank looked like a straggler)."""
    from test_rank_jobs import H100, ingest_analyze, rank_trace
    from tracekit.sources import make_trace_id

    src = tmp_path / "in"
    ids: dict[str, set[str]] = {}
    for run, scale in (("run1", 1.0), ("run2", 1.4)):
        (src / run).mkdir(parents=True)
        for r in range(2):
            p = src / run / f"llama_rank{r}.json"
            rank_trace(p, r, 2, H100, decode_scale=scale)
            ids.setdefault(run, set()).add(make_trace_id(p))
    doc, _ = ingest_analyze(src, tmp_path)
    assert sorted(set(j["traces"]) for j in doc["jobs"] if j["compared"]) == sorted(ids.values(), key=sorted)


def test_waiting_writer_says_so(tmp_path: Path) -> None:
    """A writer waiting on a held lock says so on stderr after a second (it used to print nothing
    for up to an hour), then is refused in one line when the wait is over."""
    import subprocess
    import sys

    trace = _trace(tmp_path)
    ds = tmp_path / "ds"
    tk_out("ingest", trace, "--out", ds)
    (lock,) = ds.glob(".lock-*")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl,time; f=open({str(lock)!r},'ab'); fcntl.flock(f, 2); print(1, flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline()
        r = tk_process("ingest", trace, "--out", ds, "--force", env={"TRACEKIT_LOCK_WAIT_S": "3"}, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 3 and "is being written by another process; waiting" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "field,value",
    [
        ("model", {"hidden_size": 10**309}),
        ("layout", {"engine": "sglang", "tp_rank": 2**63}),
        ("distributed", {"rank": -1}),
    ],
)
def test_dataset_meta_out_of_range_is_one_line(tmp_path: Path, field: str, value: dict[str, object]) -> None:
    """A dataset written before the checks on the way in (a model size of 10^309, a rank of 2^63):
    every later analysis is one DatasetError line saying to re-ingest, not a traceback."""
    import polars as pl

    ds = tmp_path / "ds"
    tk_out("ingest", _trace(tmp_path), "--out", ds)
    (f,) = (ds / "meta").glob("trace_id=*/data.parquet")
    df = pl.read_parquet(f)
    meta = json.loads(df["meta_json"][0])
    meta[field] = value
    df.with_columns(pl.lit(json.dumps(meta)).alias("meta_json")).write_parquet(f)
    for cmd in ("analyze", "report", "summary"):
        code, _, err = tk(cmd, ds)
        assert code == 4 and f"{field}." in _one_line(err) and "re-ingest" in err, (cmd, err)


def test_timestamp_beyond_int64_is_named_as_such(tmp_path: Path) -> None:
    """ts 1e18 µs (1e21 ns): dropped and counted as out of range, not as "missing or non-numeric"."""
    from tracekit.sources import load

    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [KERNEL, {**KERNEL, "ts": 1e18}]}))
    dropped = load(p).meta["parse_stats"]["dropped"]
    assert any("beyond ±2^6" in k for k in dropped) and not any("missing or" in k for k in dropped), dropped


def test_ranks_beyond_the_world_size_are_not_ranks_of_the_job(tmp_path: Path) -> None:
    """Ranks 0, 1, 3, 5 of world size 2: 0 and 1 are the job; 3 and 5 (dropped, counted) are alone
    (all four used to be compared as one job)."""
    from test_rank_jobs import H100, ingest_analyze, rank_trace

    src = tmp_path / "in"
    src.mkdir()
    for r in (0, 1, 3, 5):
        rank_trace(src / f"llama_rank{r}.json", r, 2, H100)
    doc, _ = ingest_analyze(src, tmp_path)
    jobs = sorted((j["ranks"], j["compared"]) for j in doc["jobs"] if j["ranks"] != [None])
    assert jobs == [([0, 1], True)]
    alone = [j for j in doc["jobs"] if j["ranks"] == [None]]
    assert len(alone) == 2 and all(not j["compared"] and "no rank in it" in j["why"] for j in alone)
