"""Nsight Systems SQLite exports (docs/nsys.md)."""

NAME = "nsys"  # the format's name: meta["format"], the registry (tracekit/sources/registry.py)
