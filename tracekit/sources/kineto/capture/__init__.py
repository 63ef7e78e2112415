"""Graph-capture merge: capture files, matching captured graphs to replays, merging their ops onto replayed
kernels."""
