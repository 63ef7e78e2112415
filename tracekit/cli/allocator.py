"""polars' jemalloc setting (``_RJEM_MALLOC_CONF``), chosen by a command for its input before
polars is loaded (it is read once, when polars' library loads): `tracekit ingest` returns freed
pages at once where memory must stay bounded (cli/ingest.py), `tracekit analyze` of a big dataset
keeps fewer arenas (cli/analyze.py). docs/kineto.md and docs/analysis.md give the figures."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def set_before_polars(choose: Callable[[], str | None]) -> bool:
    """Set ``choose()`` as polars' jemalloc setting, when polars is not loaded yet, the user set
    none, and ``choose()`` (called only then: it may read the inputs) gives one. True when set."""
    if "polars" in sys.modules or "_RJEM_MALLOC_CONF" in os.environ:
        return False
    conf = choose()
    if conf is None:
        return False
    os.environ["_RJEM_MALLOC_CONF"] = conf
    return True
