"""Coverage-guided fuzzing of the native scanner alone (``_kscan.scan`` and ``_kscan.nest``)
with atheris: thousands of inputs a second, meant to run against the ASan+UBSan build of
fuzz/asan.sh (a memory error then aborts with a report). See fuzz/README.md.

    fuzz/asan.sh --run fuzz/kscan_atheris.py -max_total_time=600
"""

from __future__ import annotations

import sys

import atheris  # type: ignore[import-not-found]

from tracekit.sources.kineto import _kscan  # type: ignore[attr-defined]

ROUTES = ((b"kernel", 0), (b"cuda_runtime", 1), (b"cpu_op", 2), (b"user_annotation", 3))
FLOWS = (b"ac2g",)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    pos = fdp.ConsumeIntInRange(0, 8)
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    if pos > len(body):
        pos = 0
    status, end, groups, pairs, slow = _kscan.scan(body, pos, ROUTES, FLOWS)
    if not (pos <= end <= len(body)) or status not in (0, 1, 2):
        raise AssertionError(f"scan: status {status}, end {end} outside [{pos}, {len(body)}]")
    if len(slow) % 24:
        raise AssertionError("scan: slow spans not (start, end, index) int64 triples")
    n = len(body) // 24
    if n:
        mv = memoryview(body[: n * 24]).cast("q")
        _kscan.nest((mv[:n].tobytes(),), mv[n : 2 * n].tobytes(), mv[2 * n : 3 * n].tobytes())


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
