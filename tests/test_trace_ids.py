"""Trace ids (tracekit/tables/ids.py): a hash of the whole file, an older tracekit's ids still
recognised by ingest; and a gzipped trace read to the same tables as its plain twin."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

from polars.testing import assert_frame_equal

from cli_run import tk
from conftest import SHARED_TRACES
from tracekit.sources import load
from tracekit.tables.ids import is_legacy_id, legacy_trace_id, make_trace_id, trace_stem
from tracekit.tables.layout import dataset_trace_ids

TRACE = SHARED_TRACES / "kineto/hta/trace_filter/sampled_rank-0.json.gz"
TABLES = ("kernels", "launches", "ops", "regions")


def test_ids_hash_the_whole_file(tmp_path: Path) -> None:
    body = b"x" * (3 << 20)  # several of the 1 MiB blocks the hash reads
    a, b, c = tmp_path / "a" / "t.json", tmp_path / "b" / "t.json", tmp_path / "c" / "t.json"
    for f, end in ((a, b"1"), (b, b"2"), (c, b"1")):
        f.parent.mkdir()
        f.write_bytes(body + end)
    # Same name and size, different last byte: different ids; the same content: the same id.
    assert make_trace_id(a) != make_trace_id(b)
    assert make_trace_id(a) == make_trace_id(c) == make_trace_id(a)
    assert re.fullmatch(r"t-[0-9a-f]{32}", make_trace_id(a))
    # xxh3_128 of the size (as text) and then the content, as tracekit/tables/ids.py says.
    assert make_trace_id(a) == "t-360935e3257330cb812fe4afdc021f53"
    assert legacy_trace_id(a) == "t-d6d1bc6fef4486107eee"  # blake2b, 80 bits: the older ids
    assert is_legacy_id(legacy_trace_id(a), "t") and not is_legacy_id(make_trace_id(a), "t")
    assert trace_stem("x/rank-0.pt.trace.json.gz") == "rank-0"


def test_reingest_replaces_the_copy_under_an_older_id(tmp_path: Path) -> None:
    src = tmp_path / "sampled_rank-0.json.gz"
    shutil.copy(TRACE, src)
    out = tmp_path / "ds"
    assert tk("ingest", str(src), "--out", str(out))[0] == 0
    new, old = make_trace_id(src), legacy_trace_id(src)
    for part in out.glob(f"*/trace_id={new}"):  # the dataset as an older tracekit wrote it
        part.rename(part.with_name(f"trace_id={old}"))
    assert dataset_trace_ids(out) == [old]

    code, stdout, _ = tk("ingest", str(src), "--out", str(out))
    assert code != 0
    assert f"trace {old} (its id from an older tracekit) is already in {out}; pass --force" in stdout
    assert dataset_trace_ids(out) == [old]

    code, stdout, _ = tk("ingest", str(src), "--out", str(out), "--force")
    assert code == 0 and "ingested 1 of 1 traces" in stdout
    assert dataset_trace_ids(out) == [new]  # one copy of the file, not two
    assert not list(out.glob(f"*/trace_id={old}"))


def test_gzip_and_plain_twins_read_to_the_same_tables(tmp_path: Path) -> None:
    plain = tmp_path / "sampled_rank-0.json"
    plain.write_bytes(gzip.decompress(TRACE.read_bytes()))
    a, b = load(str(TRACE)), load(str(plain))
    assert a.meta["parse_stats"]["gzip"] and not b.meta["parse_stats"]["gzip"]
    assert a.table("kernels").height == 1204
    for name in TABLES:
        assert_frame_equal(a.table(name).drop("trace_id"), b.table(name).drop("trace_id"))
