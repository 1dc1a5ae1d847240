"""The Dask scheduler of the stats, search, bounds and probe stages, and how cells are batched.

:func:`scheduler` gives a :class:`Run`. Where it computes:

- Dask on Ray when a Ray address is configured;
- on Linux, for several workers, Dask's multiprocessing scheduler on worker processes *forked*
  from this one (:class:`_Forked`): they start in a fraction of a second with this process's
  imports (torch among them), where a local distributed cluster took several seconds to start and
  each of its workers seconds more to import torch: a grid of a hundred tiny cells paid more for
  the cluster than for its cells;
- elsewhere (no ``fork``: macOS, Windows) a local distributed cluster on 127.0.0.1 with one
  single-threaded worker per core, started only when the first batch, run here and timed, says
  the rest would gain more from it than its start costs (:data:`CLUSTER_START_SECONDS`);
- for one worker, the tasks in this process on one thread.

``$CBENCH_DASK_CLUSTER=always`` starts the distributed cluster at once, on any platform.
Every worker runs torch and the BLAS libraries on one thread, so each path computes the same
numbers. What every task of a stage reads (the dataset) is read once: :meth:`Run.share` reads it
here before the forked workers start, which then hold it without a copy, or makes it one task of
the graph whose value the cluster ships to the others. A stage's graph has one task per batch of
consecutive cells (:func:`batches`: about :data:`BATCHES_PER_WORKER` tasks per worker), so a
grid of many small cells costs the cells' own work and not a scheduler round trip per cell.
A run shows a progress bar with an ETA on stderr, advanced as batches finish.

This module knows tasks, not what they compute: it imports none of the math
(``tests/test_layering.py``).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from dask import delayed
from dask.delayed import Delayed
from tqdm import tqdm

from pipeline.config import ComputeConfig
from pipeline.config.rules import DASK_CLUSTER_ENV, dask_cluster_problem
from pipeline.runtime.backends.addresses import LOOPBACK, ray_address
from pipeline.runtime.progress import stage_desc

BATCHES_PER_WORKER = 16  # tasks per worker: balanced load and a progress bar that moves
# What a local distributed cluster costs before it computes: its start and its workers' imports
# (torch). At 1000 tiny cells (70 MB of embeddings) two such workers were no faster than this
# process alone: stats 30-34 s against 35-37 s, search 21-25 s against 23-26 s, bounds 20-24 s
# against 16-18 s. Forked workers (Linux) cost about 0.1 s and are used whenever there are two.
CLUSTER_START_SECONDS = 10.0
FORK = sys.platform.startswith("linux")  # fork is the safe default only on Linux
T = TypeVar("T")


@dataclass(frozen=True)
class Shared:
    """A value every task of a run reads, held in this process's :data:`_SHARED` under ``key``
    (and so in workers forked after it was put there); :func:`shared` gives the value back."""

    key: str


_SHARED: dict[str, Any] = {}


class Opaque:
    """A task's argument that Dask passes on as it is (``value``). Dask looks for its
    collections inside every list, tuple, dict and dataclass of a task's arguments: for a batch
    of cells, each a dataclass of dataclasses, that walk grows with the cells of a stage's
    graph. For values that hold no Dask collection."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def shared(value: Any) -> Any:
    """The value a task was given through :meth:`Run.share`: a :class:`Shared` looked up in this
    process, anything else (a value the scheduler computed and shipped) as it is."""
    return _SHARED[value.key] if isinstance(value, Shared) else value


class Run(Protocol):
    """What :func:`scheduler` yields. Called, ``tasks`` computed together (inputs they share,
    once), their values in order, with a progress bar ``desc`` that advances by ``sizes[i]``
    (counted in ``unit``) when task ``i`` finishes. ``share(key, fn, *args)``: ``fn(*args)``
    computed once for every task of the runs that follow, to pass to them as an argument; a task
    reads it with :func:`shared`."""

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]: ...

    def share(self, key: str, fn: Callable[..., Any], *args: Any) -> Any: ...


def batches(items: Sequence[T], n_workers: int,
            per_worker: int = BATCHES_PER_WORKER) -> list[list[T]]:
    """``items`` in ``min(len(items), n_workers * per_worker)`` runs of consecutive items, in
    order, whose sizes differ by at most one (the longer first); none when there are no items."""
    for name, value in (("n_workers", n_workers), ("per_worker", per_worker)):
        if value < 1:
            raise ValueError(f"{name} = {value}: must be an integer >= 1")
    count = min(len(items), n_workers * per_worker)
    if count == 0:
        return []
    size, longer = divmod(len(items), count)
    out, start = [], 0
    for i in range(count):
        stop = start + size + (i < longer)
        out.append(list(items[start:stop]))
        start = stop
    return out


def progress(total: int, desc: str, unit: str = "cell") -> tqdm:
    """The stages' progress bar on stderr: done of ``total``, rate and ETA (tqdm's default
    refresh interval, as the train stage's)."""
    return tqdm(total=total, desc=stage_desc(desc), unit=unit, file=sys.stderr)


def _distributed(client: Any, tasks: Sequence[Delayed], sizes: Sequence[int],
                 bar: tqdm) -> list[Any]:
    """``tasks`` on the cluster of ``client``, advancing ``bar`` as each finishes."""
    from distributed import as_completed

    futures = client.compute(list(tasks))
    size = {f.key: n for f, n in zip(futures, sizes, strict=True)}
    for done in as_completed(futures):
        bar.update(size[done.key])
    return list(client.gather(futures))


def _here(tasks: Sequence[Delayed], sizes: Sequence[int], bar: tqdm,
          pool: ProcessPoolExecutor | None = None) -> list[Any]:
    """``tasks`` computed together by Dask's local scheduler: in this process (synchronous), or,
    given a ``pool``, on its processes (Dask's multiprocessing scheduler, a task at a time)."""
    import dask
    from dask.callbacks import Callback

    size = {t.key: n for t, n in zip(tasks, sizes, strict=True)}

    def finished(key: Any, *_: Any) -> None:
        if key in size:
            bar.update(size[key])

    how: dict[str, Any] = ({"scheduler": "sync"} if pool is None else
                           {"scheduler": "processes", "pool": pool, "chunksize": 1})
    with Callback(posttask=finished):
        return list(dask.compute(*tasks, optimize_graph=False, **how))


class _Graph:
    """A shared value as a task of the graph: the scheduler computes it once and ships it."""

    def share(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        return delayed(fn)(*args, dask_key_name=key)


class _Distributed(_Graph):
    def __init__(self, client: Any):
        self.client = client

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]:
        with progress(sum(sizes), desc, unit) as bar:
            return _distributed(self.client, tasks, sizes, bar)


class _Ray(_Graph):
    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]:
        import ray
        from dask import compute
        from ray.util.dask import ray_dask_get

        # ray_persist: the tasks' object refs instead of their values, to follow them finishing
        (refs,) = compute(list(tasks), scheduler=ray_dask_get, ray_persist=True)
        size = {ref: n for ref, n in zip(refs, sizes, strict=True)}
        pending = list(refs)
        with progress(sum(sizes), desc, unit) as bar:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                bar.update(size[ready[0]])
        return list(ray.get(list(refs)))


class _Here:
    """The tasks computed together in this process by Dask's synchronous scheduler."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def share(self, key: str, fn: Callable[..., Any], *args: Any) -> Shared:
        _SHARED[key] = fn(*args)
        self.keys.append(key)
        return Shared(key)

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]:
        with progress(sum(sizes), desc, unit) as bar:
            return _here(tasks, sizes, bar)

    def close(self) -> None:
        for key in self.keys:
            _SHARED.pop(key, None)


def _one_thread_worker() -> None:
    """A forked worker's start: torch and the BLAS libraries on one thread for good (the
    parent's thread pools do not survive the fork; one thread never needs them)."""
    from threadpoolctl import threadpool_limits

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    threadpool_limits(1)


def _ready() -> int:
    return os.getpid()


class _Forked(_Here):
    """Dask's multiprocessing scheduler on ``n_workers`` processes forked from this one when a
    run first has two tasks or more, after the values :meth:`share` holds (a ``share`` after
    that forks them anew at the next run); a run of one task is computed here, on one thread."""

    def __init__(self, n_workers: int):
        super().__init__()
        self.n_workers = n_workers
        self.pool: ProcessPoolExecutor | None = None

    def share(self, key: str, fn: Callable[..., Any], *args: Any) -> Shared:
        self._stop()  # workers forked before it would not hold it
        return super().share(key, fn, *args)

    def _start(self) -> ProcessPoolExecutor:
        if self.pool is None:
            pool = ProcessPoolExecutor(self.n_workers, mp_context=multiprocessing.get_context(
                "fork"), initializer=_one_thread_worker)
            for f in [pool.submit(_ready) for _ in range(self.n_workers)]:
                f.result()  # every worker forked now, before the progress bar's thread starts
            self.pool = pool
        return self.pool

    def _stop(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]:
        if len(tasks) < 2:
            with _one_thread():
                return super().__call__(tasks, desc, sizes, unit)
        pool = self._start()
        with progress(sum(sizes), desc, unit) as bar:
            return _here(tasks, sizes, bar, pool)

    def close(self) -> None:
        self._stop()
        super().close()


class _Measured(_Graph):
    """The first task here (one thread, as a worker), timed; the rest on the local cluster
    (``client()`` starts it, once) only when ``n_workers`` of them would save more than
    :data:`CLUSTER_START_SECONDS` over this process alone, else here too. A task is one of
    :func:`batches`' equal runs of cells, so the first is a fair sample of the rest."""

    def __init__(self, n_workers: int, client: Callable[[], Any]):
        self.n_workers, self.client, self.started = n_workers, client, None

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]:
        with progress(sum(sizes), desc, unit) as bar:
            if self.started is not None:
                return _distributed(self.started, tasks, sizes, bar)
            begin = time.perf_counter()
            with _one_thread():
                values = _here(tasks[:1], sizes[:1], bar)
            took = time.perf_counter() - begin
            rest = took * (len(tasks) - 1)
            if rest * (1.0 - 1.0 / self.n_workers) > CLUSTER_START_SECONDS:
                bar.write(f"{stage_desc(desc)}: the first of {len(tasks)} batches took "
                          f"{took:.2f} s here; the rest on a local cluster of "
                          f"{self.n_workers} workers")
                self.started = self.client()
                return values + _distributed(self.started, tasks[1:], sizes[1:], bar)
            with _one_thread():
                return values + _here(tasks[1:], sizes[1:], bar)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch and the BLAS libraries on one thread, as the cluster's workers run
    (``OMP_NUM_THREADS=1``), so both paths compute the same numbers; restored afterwards."""
    import torch
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def scheduler(compute_cfg: ComputeConfig, n_workers: int) -> Iterator[Run]:
    """Dask on Ray when a Ray address is configured; else forked local workers (Linux), a local
    distributed cluster on 127.0.0.1 (elsewhere, or ``$CBENCH_DASK_CLUSTER=always``), or this
    process for one worker (the module's docstring says when which).

    Yields a :class:`Run`: ``run(tasks, desc, sizes)``, ``run.share(key, fn, *args)``.
    """
    if ray_address(compute_cfg):
        # imports Ray: only here, so that a local run and the workers unpickling the stages'
        # tasks (whose modules import this one) do not pay for it
        from pipeline.runtime.backends.executor import init_ray

        init_ray(compute_cfg)
        yield _Ray()
        return
    if (problem := dask_cluster_problem()) is not None:
        raise ValueError(problem)
    always = os.environ.get(DASK_CLUSTER_ENV) == "always"
    if n_workers == 1 or (FORK and not always):
        local = _Here() if n_workers == 1 else _Forked(n_workers)
        try:
            if n_workers == 1:
                with _one_thread():
                    yield local
            else:
                yield local
        finally:
            local.close()
        return
    from distributed import Client, LocalCluster

    # One single-threaded worker per core: torch's spinning OpenMP threads in several workers
    # would fight over the cores (the stats engine ran several times slower that way).
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    with contextlib.ExitStack() as stack:
        def client() -> Any:
            cluster = stack.enter_context(LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, host=LOOPBACK,
                dashboard_address=None, env=env, silence_logs=logging.ERROR))
            return stack.enter_context(Client(cluster))

        yield _Distributed(client()) if always else _Measured(n_workers, client)
