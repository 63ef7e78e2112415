"""One task per item on dask.distributed, or serially in this process: the only place tracekit
talks to Dask (see docs/scale.md).

``run_tasks(fn, items, ...)`` calls ``fn(item)`` for every item and returns the outcomes in the
order of ``items``. Where it runs:

- ``scheduler`` (or the ``DASK_SCHEDULER_ADDRESS`` variable): on that existing cluster;
- else ``workers`` > 1: on a fresh ``LocalCluster`` of that many single-threaded worker processes,
  each with a memory limit (``memory_limit``; default: this machine's memory split evenly);
- else (one worker, or one item): serially, in this process, with no Dask at all.

A task that raises is retried ``retries`` times (Dask's ``retries``); a worker that dies mid-task
has its tasks re-run on the others by the scheduler (up to ``distributed.scheduler.allowed-failures``
deaths per task). An item whose task still fails becomes an outcome with ``error`` set; the other
items go on. ``fn`` must be importable by the workers (a module-level function of an installed
package) and its items and results picklable.

Layer: imports only tracekit.errors (and Dask, lazily), so every stage may use it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tracekit.errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
INSTALL_HINT = "pip install 'tracekit[dask]'"
RETRIES = 2


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """What one task gave: ``value`` or ``error`` (one line: exception class and message)."""

    index: int
    value: R | None
    error: str | None = None


@dataclass(frozen=True)
class Plan:
    """Where the tasks run: ``mode`` is ``serial``, ``local`` or ``cluster``."""

    mode: str
    workers: int
    scheduler: str | None = None

    def describe(self) -> str:
        if self.mode == "cluster":
            return f"dask cluster at {self.scheduler}"
        if self.mode == "local":
            return f"dask LocalCluster, {self.workers} workers"
        return "serial, in this process"


def have_dask() -> bool:
    """True when dask.distributed is installed. Found, not imported: importing it costs ≈ 0.9 s,
    which a one-file ingest (serial) must not pay just to learn that it will not use it."""
    from importlib.util import find_spec

    try:
        return find_spec("distributed") is not None
    except (ImportError, ValueError):
        return False


def plan(n_items: int, workers: int | None = None, scheduler: str | None = None) -> Plan:
    """Decide where ``n_items`` tasks run (rules in the module docstring). ``workers`` None means
    one per core when Dask is installed and there is more than one item, else serial.
    Raises UsageError for a request Dask is needed for when it is not installed."""
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {workers})")
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address:
        if not have_dask():
            raise UsageError(f"a Dask scheduler ({address}) needs dask.distributed: {INSTALL_HINT}")
        if workers is not None and scheduler:
            raise UsageError(
                "--workers sizes a local cluster; with --scheduler the cluster's own workers run the tasks"
            )
        if workers != 1:
            return Plan("cluster", 0, address)
    if workers is None:
        workers = min(os.cpu_count() or 1, n_items) if have_dask() else 1
    if workers > 1 and not have_dask():
        raise UsageError(
            f"--workers {workers} needs dask.distributed, which is not installed: {INSTALL_HINT} "
            "(or --workers 1 to run serially)"
        )
    if workers == 1 or n_items <= 1:
        return Plan("serial", 1)
    return Plan("local", min(workers, n_items))


def run_tasks(
    fn: Callable[[T], R],
    items: Sequence[T],
    where: Plan,
    on_done: Callable[[Outcome[R]], None] | None = None,
    retries: int = RETRIES,
    memory_limit: str | int | None = "auto",
    label: str = "task",
) -> list[Outcome[R]]:
    """``fn(item)`` for every item, where ``where`` says; outcomes in item order. ``on_done`` is
    called in this process as each task finishes (in completion order), e.g. for a progress bar."""
    if where.mode == "serial":
        outcomes = []
        for i, item in enumerate(items):
            try:
                out: Outcome[R] = Outcome(i, fn(item))
            except Exception as exc:  # noqa: BLE001 - reported per item, as on a cluster
                out = Outcome(i, None, _one_line(exc))
            outcomes.append(out)
            if on_done is not None:
                on_done(out)
        return outcomes
    with _client(where, memory_limit) as client:
        return _run_on(client, fn, items, on_done, retries, label)


def _run_on(
    client: Any,
    fn: Callable[[T], R],
    items: Sequence[T],
    on_done: Callable[[Outcome[R]], None] | None,
    retries: int,
    label: str,
) -> list[Outcome[R]]:
    from distributed import as_completed

    run_id = uuid.uuid4().hex[:8]
    futures = [
        client.submit(fn, item, key=f"tracekit-{label}-{run_id}-{i}", retries=retries, pure=False)
        for i, item in enumerate(items)
    ]
    index = {f.key: i for i, f in enumerate(futures)}
    outcomes: dict[int, Outcome[R]] = {}
    for fut in as_completed(futures):
        i = index[fut.key]
        if fut.status == "finished":
            out: Outcome[R] = Outcome(i, fut.result())
        else:
            exc = fut.exception()
            out = Outcome(i, None, _one_line(exc) if exc is not None else f"task {fut.status}")
        fut.release()
        outcomes[i] = out
        if on_done is not None:
            on_done(out)
    return [outcomes[i] for i in range(len(items))]


@contextmanager
def _client(where: Plan, memory_limit: str | int | None) -> Iterator[Any]:
    """A Client on the planned cluster; a LocalCluster is started here and closed on exit."""
    method = start_method()  # before importing distributed, which starts threads of its own
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # installed (have_dask found it) but broken
        raise UsageError(f"dask.distributed cannot be imported ({_one_line(exc)}): {INSTALL_HINT}") from None

    if where.mode == "cluster":
        try:
            client = Client(where.scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"cannot reach the Dask scheduler at {where.scheduler}: {_one_line(exc)}") from None
        with closing(client):
            yield client
        return
    # Single-threaded workers (one task each at a time); polars inside a task gets one thread per
    # worker's share of the cores, so the workers do not fight over them.
    # The workers' statistical profiler (a stack sample every 10 ms) is off: nobody looks at it here.
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in its workers, which also pins glibc's mmap
    # threshold: every large buffer of an ingest is then mapped and unmapped afresh — ≈ 0.4 s more
    # system time per 160 MB trace, ≈ 40 % more CPU per task (BENCHMARKS.md, "Ranks on Dask").
    # tracekit's workers keep glibc's defaults, as the serial path does; memory stays bounded
    # by one trace per worker.
    import dask

    threads = max(1, (os.cpu_count() or 1) // where.workers)
    environ = {
        k: v
        for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ") or {}).items()
        if k != "MALLOC_TRIM_THRESHOLD_"
    }
    settings: dict[str, Any] = {
        "distributed.worker.profile.enabled": False,
        "distributed.nanny.pre-spawn-environ": environ,
    }
    configured = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    if method == "fork" and configured == "spawn":  # Dask's default; a user's choice is kept
        settings["distributed.worker.multiprocessing-method"] = "fork"
    with dask.config.set(settings):
        cluster = LocalCluster(
            n_workers=where.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            # Dask's scheduler serves HTTP even without a dashboard, on 8787 unless told: a
            # port in use there printed Dask's own warning into tracekit's output
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
            env={"POLARS_MAX_THREADS": str(threads)},
        )
    with closing(cluster), closing(Client(cluster)) as client:
        yield client


METHOD_ENV = "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"


def start_method() -> str:
    """How a LocalCluster's worker processes start: ``fork`` when this process has a single thread
    (Linux), else Dask's configured method (``spawn`` by default).

    A spawned worker is a fresh interpreter that imports dask.distributed again (≈ 1 s each; on 2
    cores they start one after the other's import); a forked one starts with what this process
    has imported. Forking is safe only while no other thread exists — a thread holding a lock at
    the fork leaves the child deadlocked; polars' thread pool, once used, does exactly that — so
    the rule counts this process's native threads (``/proc/self/task``), not Python's, before
    dask.distributed is imported (its own idle threads are Dask's to handle: Dask supports
    ``fork``). A method the user set (``DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD`` or
    Dask's configuration files) is kept."""
    if os.environ.get(METHOD_ENV):
        return os.environ[METHOD_ENV]
    try:
        single = len(os.listdir("/proc/self/task")) == 1
    except OSError:  # not Linux
        single = False
    return "fork" if single else "spawn"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    name = exc.__class__.__name__
    # tracekit's own errors already read as one sentence; others keep their class for context.
    return text if exc.__class__.__module__.startswith("tracekit") else f"{name}: {text}"
