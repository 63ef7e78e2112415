"""The per-class and per-shape roofline points, and the exact float sums that keep them stable."""
