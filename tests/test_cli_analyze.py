"""`tracekit analyze` end to end: formats, the JSON contract, bad input as one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import tk, tk_process

REPO = Path(__file__).resolve().parent.parent
LLM = REPO / "sample_traces/llm/llm.pt.trace.json.gz"


def test_json_contract_on_runner_trace() -> None:
    code, out, _ = tk("analyze", str(LLM), "--format", "json", "--slo", "ttft=1000,tpot=1000")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"version", "trace", "device", "diagnostic", "regions", "phases", "unattributed", "totals"}
    assert doc["version"] == 1 and doc["diagnostic"] == "CPU diagnostic — not GPU evidence"
    assert {p["phase"] for p in doc["phases"]} == {"prefill", "decode"}
    t = doc["totals"]
    assert t["attributed_ns"] + t["unattributed_ns"] == t["device_time_ns"] and t["conserved"] is True
    # Generous SLOs: every request is good.
    assert t["goodput_fraction"] == 1.0


def test_markdown_and_table() -> None:
    code, out, _ = tk("analyze", str(LLM), "--format", "markdown")
    assert code == 0 and "## Phases" in out and "| prefill |" in out
    code, out, _ = tk("analyze", str(LLM), "--thresholds", "busy=0.01")
    # With busy=0.01 nothing on this CPU trace is overhead-bound by the busy rule.
    assert code == 0 and "Phases" in out and "busy 5 % of span:" not in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--slo", "ttft=abc"], "--slo"),
        (["--hardware", "NoSuchGPU"], "unknown hardware"),
        (["--phase-map", "foo=sideways"], "--phase-map"),
        (["--thresholds", "busy=2"], "--thresholds"),
    ],
)
def test_bad_options_one_line(args: list[str], needle: str) -> None:
    code, out, err = tk("analyze", str(LLM), *args)
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_not_a_trace_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    p = tk_process("analyze", bad)
    assert p.returncode != 0 and "Traceback" not in p.stderr and p.stderr.startswith("tracekit: error:")


def test_dataset_gives_same_result(tmp_path: Path) -> None:
    import tracekit
    from tracekit.analysis import analyze
    from tracekit.tables.trace import write_dataset

    tr = tracekit.load(str(LLM))
    write_dataset(tr, tmp_path / "ds")
    a = analyze(tr).to_json()
    b = analyze(tracekit.load(str(tmp_path / "ds"))).to_json()
    key = lambda d: [(r["name"], r["busy_ns"], r["span_ns"], r["flops"], r["bound"]) for r in d["regions"]]  # noqa: E731
    assert key(a) == key(b) and a["totals"]["device_time_ns"] == b["totals"]["device_time_ns"]


def test_dataset_analysis_prints_the_file_analysis(tmp_path: Path) -> None:
    # The CLI analysis of a dataset reads only ANALYSIS_COLUMNS of its tables (analysis/store/
    # derived.py); a column left out there reads as null without a word. nccl_data's collectives
    # state their message sizes ("In msg nelems" x dtype): per 7-kernel cycle, floats
    # 6,637,568 + 2,431,040 + 53,120 + 2,049,000 + 7,875,584 + 6,563,840 = 25,610,152 x 4 B
    # = 102,440,608 B and one Long broadcast 53 x 8 = 424 B; 3 cycles: 307,323,096 B.
    nccl = REPO.parent / "shared/traces/kineto/hta/nccl_parser_config/nccl_data.json.gz"
    if not nccl.exists():
        pytest.skip("shared traces not present")
    code, from_file, _ = tk("analyze", str(nccl), "--format", "json", "--no-reuse")
    assert code == 0
    assert tk("ingest", str(nccl), "--out", str(tmp_path / "ds")).code == 0
    code, from_ds, _ = tk("analyze", str(tmp_path / "ds"), "--format", "json", "--no-reuse")
    assert code == 0 and from_ds == from_file
    sizes = [r["comm_bytes"] for r in json.loads(from_ds)["totals"]["communication"]]
    assert sizes and set(sizes) == {307_323_096}


def test_analysis_allocator_for_big_datasets_only(tmp_path: Path) -> None:
    # commands/analyze.analysis_allocator: a dataset of >= 4 MiB of canonical Parquet (all traces) is
    # analysed with one jemalloc arena per CPU and pages returned after 0.5 s; a smaller dataset,
    # derived tables and stored results not counted: polars' default (None). A trace file of
    # >= 64 MiB (a .gz: its size times 10, about what it inflates to) takes the same setting.
    from tracekit.commands.analyze import analysis_allocator
    from tracekit.tuning import BIG_DATASET_BYTES, BIG_TRACE_BYTES, GZIP_RATIO

    ds = tmp_path / "ds"
    (ds / "meta" / "trace_id=a").mkdir(parents=True)
    for table, size in [("kernels", 1 << 20), ("ops", 2 << 20), ("attribution_activities", 8 << 20)]:
        d = ds / table / "trace_id=a"
        d.mkdir(parents=True)
        with open(d / "data.parquet", "wb") as f:
            f.truncate(size)  # sparse: sizes without the disk use
    assert BIG_DATASET_BYTES == 4 << 20
    assert analysis_allocator(str(ds), cpus=3) is None  # 3 MiB of canonical tables
    (ds / "regions" / "trace_id=b").mkdir(parents=True)
    with open(ds / "regions" / "trace_id=b" / "data.parquet", "wb") as f:
        f.truncate(1 << 20)  # now 4 MiB
    assert analysis_allocator(str(ds), cpus=3) == "narenas:1,dirty_decay_ms:500,muzzy_decay_ms:0"
    # one arena per two CPUs: on 2 CPUs one (the 860 MB replica: median peak -11 MB, same CPU)
    assert analysis_allocator(str(ds), cpus=2) == "narenas:1,dirty_decay_ms:500,muzzy_decay_ms:0"
    assert analysis_allocator(str(ds), cpus=1) == "narenas:1,dirty_decay_ms:500,muzzy_decay_ms:0"
    assert analysis_allocator(str(ds), cpus=8) == "narenas:4,dirty_decay_ms:500,muzzy_decay_ms:0"
    trace = tmp_path / "t.json"
    with open(trace, "wb") as f:
        f.truncate(5 << 20)
    assert analysis_allocator(str(trace), cpus=3) is None
    assert (BIG_TRACE_BYTES, GZIP_RATIO) == (64 << 20, 10)
    with open(trace, "wb") as f:
        f.truncate(64 << 20)  # 64 MiB: big
    assert analysis_allocator(str(trace), cpus=3) == "narenas:1,dirty_decay_ms:500,muzzy_decay_ms:0"
    gz = tmp_path / "t.json.gz"
    with open(gz, "wb") as f:
        f.truncate(7 << 20)  # 7 MiB gzipped: about 70 MiB of JSON
    assert analysis_allocator(str(gz), cpus=3) == "narenas:1,dirty_decay_ms:500,muzzy_decay_ms:0"
    with open(gz, "wb") as f:
        f.truncate(6 << 20)  # about 60 MiB: not
    assert analysis_allocator(str(gz), cpus=3) is None
    assert analysis_allocator(str(tmp_path / "missing.json"), cpus=3) is None


def test_json_document_printed_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    # `analyze --format json` (nothing stored) prints the document a chunk of region rows at a
    # time (report/jsonout.document_parts): the same text as the whole document, never held at
    # once (the 860 MB replica's compact, indented and newline-terminated copies: ~300 MB).
    import tracekit.cli.outfile as cli  # where the command prints
    from tracekit.analysis import result
    from tracekit.analysis.contract import rows as result_rows
    from tracekit.report.formats.json_print import document

    pieces: list[bytes] = []
    wholes: list[bytes] = []
    real_echo, real_parts = cli.echo, result.AnalysisResult.to_json_parts

    def echo(message: object = None, **kw: object) -> None:
        if isinstance(message, bytes):
            pieces.append(message)
        real_echo(message, **kw)  # type: ignore[arg-type]

    def parts(self: result.AnalysisResult) -> object:
        wholes.append(document(self.to_json_bytes()))  # the whole document of the same result
        return real_parts(self)

    monkeypatch.setattr(cli, "echo", echo)
    monkeypatch.setattr(result.AnalysisResult, "to_json_parts", parts)
    monkeypatch.setattr(result_rows, "ROW_CHUNK", 2)
    code, out, _ = tk("analyze", str(LLM), "--format", "json")
    assert code == 0 and len(wholes) == 1
    whole = wholes[0]
    assert out.encode() == b"".join(pieces) == whole
    n = len(json.loads(out)["regions"])
    assert n > 2 and len(pieces) == 2 + 2 * -(-n // 2) and pieces[0].endswith(b'"regions": ')
    rows = [p.count(b'\n      "region_id": ') for p in pieces]  # the region objects' own key
    assert rows[0] == rows[-1] == 0 and sum(rows) == n and max(rows) == 2
