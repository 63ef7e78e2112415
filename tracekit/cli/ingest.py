"""``tracekit ingest TRACE... --out DIR``: traces → canonical Parquet dataset (one line per trace)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import click
import polars as pl

from tracekit.cli.options import force_option, out_option
from tracekit.errors import NotATraceError, TracekitError, UsageError
from tracekit.cli.progress import Progress

TABLES = ("kernels", "launches", "ops", "regions")
STREAM_BYTES = 256 << 20  # Kineto JSON at least this large is ingested with bounded memory


def json_size(f: Path) -> int:
    """Uncompressed size of a (possibly gzipped) file, estimated: gzip's ISIZE trailer (size mod
    2^32; at least 20× the compressed size once that could wrap — Kineto JSON compresses
    10–30×), never above 100× the compressed size (the trailer of a cut-off file is noise)."""
    try:
        size = f.stat().st_size
        with open(f, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b" or size < 20:
                return size
            fh.seek(-4, os.SEEK_END)
            isize = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 0  # unreadable: the loader reports it, in one line
    return min(max(isize, 20 * size if size >= (1 << 32) // 20 else 0), 100 * size)


@click.command("ingest")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@out_option("Dataset directory (created if missing); traces are added to it.", required=True,
            type=click.Path(path_type=Path))
@force_option("a trace the dataset already holds (re-ingest it)")
@click.option("--stream/--no-stream", "stream", default=None,
              help="Bounded memory: tables written one at a time, derived tables not stored "
                   f"(default: only for Kineto traces of {STREAM_BYTES >> 20} MiB of JSON or more).")
def ingest(traces: tuple[Path, ...], out: Path, force: bool, stream: bool | None) -> None:
    """Read Kineto JSON (.json / .json.gz) and Nsight Systems SQLite traces into DIR.

    A directory argument means every trace under it; formats are told by content.
    Each trace is written atomically; a trace that fails is reported and the others go on
    (the exit code is then non-zero). Large Kineto traces are streamed (see --stream): their
    derived tables are computed by the first analysis instead of at ingest.
    """
    from tracekit.sources import find_traces, load, make_trace_id, sniff
    from tracekit.tables.trace import dataset_trace_ids
    from tracekit.analysis.derived import write_with_derived

    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: --out exists and is not a directory")
    errors: list[str] = []
    files: list[Path] = []
    from_dir: set[Path] = set()  # files found inside a directory argument: non-traces there are skipped
    skipped: list[str] = []
    for t in traces:
        try:
            found = [f for f in find_traces(t) if out.resolve() not in f.resolve().parents]
            files.extend(found)
            if t.is_dir():
                from_dir.update(found)
        except TracekitError as exc:
            errors.append(str(exc))
            click.echo(f"{t}: error: {exc}")
    total = len(files) + len(errors)
    held = set(dataset_trace_ids(out)) if out.is_dir() and not force else set()
    ok = 0
    with Progress(len(files), "ingest") as bar:
        for f in files:
            bar.set_detail(f.name)
            streamed = False
            try:
                if make_trace_id(f) in held:
                    raise UsageError(f"trace {make_trace_id(f)} is already in {out}; pass --force to replace it")
                if sniff(f) == "nsys":  # chunked, bounded memory: writes the dataset itself
                    meta, heights = _ingest_nsys(f, out)
                elif stream or (stream is None and json_size(f) >= STREAM_BYTES):
                    from tracekit.sources.kineto.ingest import ingest_kineto

                    meta, heights = ingest_kineto(f, out)
                    streamed = True
                else:
                    trace = load(f)
                    write_with_derived(trace, out)  # canonical + derived tables, one atomic commit
                    meta, heights = trace.meta, {n: trace.table(n).height for n in TABLES}
            except NotATraceError as exc:
                if f not in from_dir:
                    errors.append(f"{f}: {exc}")
                    bar.write(f"{f}: error: {exc}")
                else:
                    why = str(exc).removeprefix(f"{f}: ")
                    skipped.append(f"{f}: {why}")
                    bar.write(f"{f}: skipped: {why}")
            except TracekitError as exc:
                errors.append(f"{f}: {exc}")
                bar.write(f"{f}: error: {exc}")
            else:
                ok += 1
                bar.write(_line(f, meta, heights))
                if streamed:
                    bar.write(f"{f}: streamed with bounded memory; derived tables not stored "
                              "(the first analysis computes them)")
            bar.update(1)
    total -= len(skipped)
    click.echo(f"ingested {ok} of {total} traces into {out}"
               + (f"; skipped {len(skipped)} file{' that is not a trace' if len(skipped) == 1 else 's that are not traces'}"
                  " (listed above)" if skipped else ""))
    if errors:
        raise TracekitError(f"{len(errors)} of {total} inputs failed (see the lines above)")


def _ingest_nsys(f: Path, out: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """An Nsight Systems export through the chunked writer (never the whole export in memory).
    Partitions of this trace in tables other than the canonical ones (e.g. derived tables of an
    earlier ingest) are removed first: they might describe another row order."""
    from tracekit.tables.ids import make_trace_id
    from tracekit.sources.nsys.ingest import ingest_nsys
    from tracekit.tables.trace import DATA_FILE, META_TABLE

    tid = make_trace_id(f)
    for stale in out.glob(f"*/trace_id={tid}"):
        if stale.parent.name not in (*TABLES, META_TABLE) and not stale.parent.name.startswith("."):
            shutil.rmtree(stale, ignore_errors=True)
    ingest_nsys(f, out, tid)
    meta: dict[str, Any] = json.loads(pl.read_parquet(out / META_TABLE / f"trace_id={tid}" / DATA_FILE)["meta_json"][0])
    meta["trace_id"] = tid
    heights = {n: pl.scan_parquet(out / n / f"trace_id={tid}" / DATA_FILE).select(pl.len()).collect().item()
               for n in TABLES}
    return meta, heights


def _line(f: Path, meta: dict[str, object], heights: dict[str, int]) -> str:
    stats = meta.get("parse_stats") or {}
    assert isinstance(stats, dict)
    dropped = sum((stats.get("dropped") or {}).values())
    warns = meta.get("warnings") or []
    assert isinstance(warns, list)
    text = (f"{f}: {meta.get('trace_id')}  {heights['kernels']} device activities, {heights['launches']} launches, "
            f"{heights['ops']} ops, {heights['regions']} regions; {stats.get('events_read')} events read, "
            f"{dropped} dropped")
    if warns:
        text += f"; {len(warns)} warning(s): {warns[0]}"
    return text
