"""Idle time by cause: the causes, their interval arithmetic, host threads' op stretches, and the culprits per
region and phase."""
