"""Tiny hand-made traces for golden tests (built in code so each event sits next to its reason)."""
