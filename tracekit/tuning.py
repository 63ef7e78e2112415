"""polars' jemalloc setting (``_RJEM_MALLOC_CONF``), chosen by a command for its input before
polars is loaded (it is read once, when polars' library loads): `tracekit ingest` returns freed
pages at once where memory must stay bounded (cli/ingest.py), `tracekit analyze` of a big dataset
keeps fewer arenas (cli/analyze.py). docs/kineto.md and docs/analysis.md give the figures."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


# What polars' __init__ writes into _RJEM_MALLOC_CONF when it loads (its defaults, then the value it
# found appended): a process started by a Python program that had imported polars inherits it.
POLARS_DEFAULTS = ("dirty_decay_ms:500", "muzzy_decay_ms:1000", "thp:always", "metadata_thp:always")


def user_setting(value: str | None) -> bool:
    """Whether ``_RJEM_MALLOC_CONF`` holds a choice of the user's: set, and not only what polars
    itself wrote there (its defaults, once or more: inherited from a parent process that had loaded
    polars, e.g. a benchmark harness or a notebook's subprocess)."""
    return value is not None and any(o and o not in POLARS_DEFAULTS for o in value.split(","))


def set_before_polars(choose: Callable[[], str | None]) -> bool:
    """Set ``choose()`` as polars' jemalloc setting, when polars is not loaded yet, the user set
    none (:func:`user_setting`), and ``choose()`` (called only then: it may read the inputs) gives
    one. True when set."""
    if "polars" in sys.modules or user_setting(os.environ.get("_RJEM_MALLOC_CONF")):
        return False
    conf = choose()
    if conf is None:
        return False
    os.environ["_RJEM_MALLOC_CONF"] = conf
    return True
