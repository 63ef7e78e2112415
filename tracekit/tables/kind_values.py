"""The kind values of ``kernels.kind`` and ``regions.kind`` (docs/schema.md), without polars:
the Kineto routes (tracekit/sources/kineto/routes.py) are declared without polars. Re-exported by
:mod:`tracekit.tables.schema`, where every other part of the schema lives."""

from __future__ import annotations

from typing import Final

# Kinds of device activity in ``kernels.kind``.
KIND_KERNEL: Final = "kernel"
KIND_MEMCPY: Final = "memcpy"
KIND_MEMSET: Final = "memset"
# CPU-only traces: leaf operators stand in for kernels in analyses (never stored in ``kernels``).
KIND_CPU_OP: Final = "cpu_op"

# Kinds of region in ``regions.kind``.
REGION_USER: Final = "user_annotation"  # record_function on a CPU thread
REGION_GPU_USER: Final = "gpu_user_annotation"  # the same range projected onto a device stream
REGION_NVTX: Final = "nvtx"  # Nsight Systems NVTX range
