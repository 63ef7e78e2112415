"""Kineto: torch.profiler's Chrome trace JSON (docs/kineto.md)."""

NAME = "kineto"  # the format's name: meta["format"], the registry (tracekit/sources/registry.py)
