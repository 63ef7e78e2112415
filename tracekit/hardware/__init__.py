"""Device peaks: the datasheet table, hardware files, and measuring this machine.

Public API: :class:`Hardware`; :func:`load_hardware_file` (what ``--hardware FILE`` reads);
:func:`calibrate` (``tracekit calibrate`` as a function: measure this machine's copy bandwidth and
matmul FLOP/s, optionally with a fixed thread count and only some dtypes).
"""

from __future__ import annotations

from tracekit.hardware.calibrate import measure as calibrate
from tracekit.hardware.peaks import Hardware, load_hardware_file

__all__ = ["Hardware", "load_hardware_file", "calibrate"]
