"""Workloads whose prefill and decode regions are annotated exactly (``tracekit run ...``).

- :mod:`tracekit.workloads.phase_shape` — one d×d projection over a sweep of row counts (prefill rows,
  decode batch) with its optimistic arithmetic intensity computed before it runs.
- :mod:`tracekit.workloads.llm` — a small decoder-only transformer (random weights) with a preallocated
  KV cache; :mod:`tracekit.workloads.generate` runs static-batch prefill + greedy decode.
- :mod:`tracekit.workloads.serve` — a continuous-batching loop with a token budget and chunked prefill.

Importing this package does not import torch; the modules that run work do.
"""
