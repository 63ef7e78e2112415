"""Coverage-guided fuzzing of the Kineto reader with atheris (local runs; not part of CI).

Each input is written to a file and read through both paths, pure Python and the native
scanner; the run fails on anything but a typed one-line error or two identical readings (the
same checks as tests/test_hostile_fuzz.py, which keeps the seeded campaign in CI). See
fuzz/README.md for how to run it, with or without the sanitized scanner.

    .venv/bin/python fuzz/kineto_atheris.py -max_total_time=600 -max_len=65536 fuzz/corpus/
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris  # type: ignore[import-not-found]

with atheris.instrument_imports(include=["tracekit"]):
    from tracekit.errors import TracekitError
    from tracekit.sources.kineto.reading import native
    from tracekit.sources.kineto.loader import load_kineto

TABLES = ("kernels", "launches", "ops", "regions")
_DIR = Path(tempfile.mkdtemp(prefix="tk-atheris-"))


def _read(path: Path, pure: bool) -> object:
    os.environ["TRACEKIT_PURE_PYTHON"] = "1" if pure else "0"
    try:
        return load_kineto(path)
    except TracekitError as exc:
        if "\n" in str(exc):
            raise AssertionError(f"multi-line error: {exc!r}") from None
        return exc


def test_one_input(data: bytes) -> None:
    path = _DIR / ("in.json.gz" if data[:2] == b"\x1f\x8b" else "in.json")
    path.write_bytes(data)
    pure = _read(path, True)
    other = _read(path, False) if native.available() else pure
    if isinstance(pure, TracekitError) or isinstance(other, TracekitError):
        if type(pure) is not type(other) or str(pure) != str(other):
            raise AssertionError(f"paths disagree: pure {pure!r} | native {other!r}")
        return
    for t in TABLES:
        if not pure.table(t).equals(other.table(t)):  # type: ignore[attr-defined]
            raise AssertionError(f"table {t} differs between the paths")
    if pure.meta != other.meta:  # type: ignore[attr-defined]
        raise AssertionError("metadata differs between the paths")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
