"""Regions and phases: per-group device metrics, roll-ups into region/phase rows, windows, top kernels/ops,
kernel classes, phases from shapes."""
