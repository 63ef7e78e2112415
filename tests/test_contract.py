"""The TypedDicts of tracekit/analysis/contract/types.py mirror the JSON the analysis writes: every key of
every stored snapshot (tests/snapshots/analyze) is declared, and every required key is present.
A key added to ``AnalysisResult.to_json`` fails here until the contract (and docs/json.md) has it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tracekit.analysis.contract import types as c

SNAPSHOTS = sorted((Path(__file__).parent / "snapshots" / "analyze").glob("*.json"))


def _check(obj: dict[str, Any], td: Any, where: str) -> None:
    keys = set(td.__required_keys__) | set(td.__optional_keys__)
    assert set(obj) <= keys, f"{where}: keys not in {td.__name__}: {sorted(set(obj) - keys)}"
    assert set(td.__required_keys__) <= set(obj), f"{where}: missing {sorted(set(td.__required_keys__) - set(obj))}"


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_snapshot_matches_the_typed_contract(path: Path) -> None:
    doc = json.loads(path.read_text())
    _check(doc, c.AnalysisDoc, "document")
    _check(doc["trace"], c.TraceInfo, "trace")
    _check(doc["device"], c.DeviceInfo, "device")
    _check(doc["unattributed"], c.Unattributed, "unattributed")
    for r in doc["unattributed"]["by_reason"]:
        _check(r, c.ReasonRow, "unattributed.by_reason[]")
    t = doc["totals"]
    _check(t, c.Totals, "totals")
    _check(t["trace"], c.Metrics, "totals.trace")
    for key, td in (
        ("top_kernels", c.TopRow),
        ("top_ops", c.TopRow),
        ("op_classes", c.OpClassRow),
        ("communication", c.CommRow),
        ("requests", c.RequestRow),
    ):
        for row in t.get(key) or []:
            _check(row, td, f"totals.{key}[]")
    for r in doc["regions"]:
        _check(r, c.RegionRow, f"regions[{r.get('name')}]")
        for row in r["top_kernels"] + r["top_ops"]:
            _check(row, c.TopRow, "regions[].top_*")
    for p in doc["phases"]:
        _check(p, c.PhaseRow, f"phases[{p.get('phase')}]")
        for row in p.get("latency", {}).values():
            _check(row, c.LatencyRow, "phases[].latency")
        for row in p.get("step_time_by_ctx", []):
            _check(row, c.CtxBucket, "phases[].step_time_by_ctx")
        for row in p.get("op_classes", []):
            _check(row, c.OpClassRow, "phases[].op_classes")


def test_there_are_snapshots() -> None:
    assert len(SNAPSHOTS) >= 5


def test_json_bytes_equal_the_encoded_document(shared_traces: Path) -> None:
    # to_json_bytes() skips the NaN-cleaning round trip of to_json(): it relies on msgspec writing
    # non-finite floats as null, which is pinned here, and must give the very same bytes.
    import msgspec

    import tracekit
    from tracekit.analysis import analyze

    assert msgspec.json.encode({"a": float("nan"), "b": float("-inf")}) == b'{"a":null,"b":null}'
    r = analyze(tracekit.load(str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz")))
    assert r.to_json_bytes() == msgspec.json.encode(r.to_json())


def test_json_parts_print_as_the_whole_document(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # to_json_parts() + report/jsonout.document_parts print the region rows a chunk at a time:
    # the pieces joined are the printed document of to_json_bytes(), for any chunk size, and with
    # no region at all; no piece holds more than one chunk of rows.
    import polars as pl

    import tracekit
    from tracekit.analysis import analyze
    from tracekit.analysis.contract import rows as result_rows
    from tracekit.report.formats.json_print import document, document_parts

    r = analyze(tracekit.load(str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz")))
    assert r.regions.height > 20
    whole = document(r.to_json_bytes())
    for chunk in (1, 7, 4096):
        monkeypatch.setattr(result_rows, "ROW_CHUNK", chunk)
        pieces = list(document_parts(*r.to_json_parts()))
        assert b"".join(pieces) == whole
        assert len(pieces) == 2 + 2 * -(-r.regions.height // chunk)  # head, (separator, rows) per chunk, tail
    # the regions' top kernels, ops and culprits become Python objects a chunk of regions at a time
    seen: list[int] = []
    real = result_rows._by_scope

    def spy(df: pl.DataFrame, kind: str, *rest: pl.Expr | None) -> dict[str, list[object]]:
        got = real(df, kind, *rest)
        if kind == "region":
            seen.append(len(got))
        return got

    monkeypatch.setattr(result_rows, "_by_scope", spy)
    monkeypatch.setattr(result_rows, "ROW_CHUNK", 3)
    skeleton, placeholder, chunks = r.to_json_parts()
    assert not seen  # nothing per region before the chunks are read
    assert b"".join(document_parts(skeleton, placeholder, chunks)) == whole
    assert len(seen) == 3 * -(-r.regions.height // 3) and 0 < max(seen) <= 3
    none = replace(r, regions=r.regions.head(0), idle_culprits=pl.DataFrame())
    assert b"".join(document_parts(*none.to_json_parts())) == document(none.to_json_bytes())


def test_struct_rows_encode_as_the_dicts() -> None:
    # result_rows._rows builds Struct records instead of dicts for speed: the encoded bytes must be
    # those of the dicts — column names that are not identifiers, nulls, NaN, nested lists, the
    # extra columns appended in order, and frames without columns or rows.
    import msgspec
    import polars as pl

    from tracekit.analysis.contract.rows import _dicts, _rows

    df = pl.DataFrame({"1x": [1, None], "class": [float("nan"), 2.5], "a b": ["µ", None]})
    extra = {"top_kernels": [[{"name": "k"}], []]}
    want = [{**d, "top_kernels": t} for d, t in zip(_dicts(df), extra["top_kernels"])]
    assert msgspec.json.encode(_rows(df, extra)) == msgspec.json.encode(want)
    assert msgspec.json.encode(_rows(df, extra)) == (
        b'[{"1x":1,"class":null,"a b":"\xc2\xb5","top_kernels":[{"name":"k"}]},'
        b'{"1x":null,"class":2.5,"a b":null,"top_kernels":[]}]'
    )
    assert msgspec.json.encode(_rows(df.head(0))) == b"[]"


def test_rows_encoded_in_chunks_equal_the_whole_list() -> None:
    # result_rows.encoded_rows encodes the region rows a chunk at a time into one buffer (msgspec.Raw
    # in the document): the bytes of encoding the whole list, for any chunk size, and "[]" empty.
    import msgspec
    import polars as pl

    from tracekit.analysis.contract.rows import encoded_rows, _rows

    df = pl.DataFrame({"region_id": [1, 2, 3, 4, 5], "x": [0.5, float("nan"), None, 2.0, 1e-05]})
    extra = {"top_kernels": [[{"name": "k"}], [], [], [{"name": "µ"}], []]}
    whole = msgspec.json.encode(_rows(df, extra))
    for chunk in (1, 2, 3, 5, 4096):
        assert msgspec.json.encode({"r": encoded_rows(df, extra, chunk)}) == b'{"r":' + whole + b"}"
    assert msgspec.json.encode(encoded_rows(df.head(0), {"top_kernels": []})) == b"[]"
