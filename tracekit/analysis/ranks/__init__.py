"""Several traces of one dataset compared as ranks: the per-trace task and the comparison across them."""
