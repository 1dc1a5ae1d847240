"""The Dask scheduler of the stats, search, bounds and probe stages, and how cells are batched.

:func:`scheduler` gives a :class:`Run`: Dask on Ray when a Ray address is configured, else a local
distributed cluster on 127.0.0.1 with one single-threaded worker per core, or, for one worker,
the tasks in this process on one thread (a cluster of one worker buys nothing, and starting it
and its worker's imports cost several seconds a stage). With several workers the first task
runs here and is timed, and the cluster starts only when the rest would gain more from it than
its start costs (:data:`CLUSTER_START_SECONDS`): a grid of a hundred tiny cells never pays for
one. ``$CBENCH_DASK_CLUSTER=always`` starts it at once. A stage's graph has
one task per batch of consecutive cells (:func:`batches`: about :data:`BATCHES_PER_WORKER` tasks
per worker), so a grid of many small cells costs the cells' own work and not a scheduler round
trip per cell: a task of a few milliseconds costs the distributed scheduler about as much again.
A run shows a progress bar with an ETA on stderr, advanced as batches finish.

This module knows tasks, not what they compute: it imports none of the math
(``tests/test_layering.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from dask.delayed import Delayed
from tqdm import tqdm

from pipeline.config import ComputeConfig
from pipeline.config.rules import DASK_CLUSTER_ENV, dask_cluster_problem
from pipeline.runtime.addresses import LOOPBACK, ray_address
from pipeline.runtime.progress import stage_desc

BATCHES_PER_WORKER = 16  # tasks per worker: balanced load and a progress bar that moves
# What a local cluster costs before it computes: its start and its workers' imports (torch).
# At 1000 tiny cells (70 MB of embeddings) two workers were no faster than this process alone:
# stats 30-34 s against 35-37 s, search 21-25 s against 23-26 s, bounds 20-24 s against 16-18 s.
CLUSTER_START_SECONDS = 10.0
T = TypeVar("T")


class Run(Protocol):
    """What :func:`scheduler` yields: ``tasks`` computed together (inputs they share, once), their
    values in order, with a progress bar ``desc`` that advances by ``sizes[i]`` (counted in
    ``unit``) when task ``i`` finishes."""

    def __call__(self, tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
                 unit: str = "cell") -> list[Any]: ...


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


def _here(tasks: Sequence[Delayed], sizes: Sequence[int], bar: tqdm) -> list[Any]:
    """``tasks`` computed together in this process by Dask's synchronous scheduler."""
    import dask
    from dask.callbacks import Callback

    size = {t.key: n for t, n in zip(tasks, sizes, strict=True)}

    def finished(key: Any, *_: Any) -> None:
        if key in size:
            bar.update(size[key])

    with Callback(posttask=finished):
        return list(dask.compute(*tasks, scheduler="sync", optimize_graph=False))


def _run_distributed(client: Any) -> Run:
    def run(tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
            unit: str = "cell") -> list[Any]:
        with progress(sum(sizes), desc, unit) as bar:
            return _distributed(client, tasks, sizes, bar)

    return run


def _run_ray() -> Run:
    import ray
    from dask import compute
    from ray.util.dask import ray_dask_get

    def run(tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
            unit: str = "cell") -> list[Any]:
        # ray_persist: the tasks' object refs instead of their values, to follow them finishing
        (refs,) = compute(list(tasks), scheduler=ray_dask_get, ray_persist=True)
        size = {ref: n for ref, n in zip(refs, sizes, strict=True)}
        pending = list(refs)
        with progress(sum(sizes), desc, unit) as bar:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                bar.update(size[ready[0]])
        return list(ray.get(list(refs)))

    return run


def _run_here() -> Run:
    """The tasks computed together in this process by Dask's synchronous scheduler."""
    def run(tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
            unit: str = "cell") -> list[Any]:
        with progress(sum(sizes), desc, unit) as bar:
            return _here(tasks, sizes, bar)

    return run


def _run_measured(n_workers: int, client: Callable[[], Any]) -> Run:
    """The first task here (one thread, as a worker), timed; the rest on the local cluster
    (``client()`` starts it, once) only when ``n_workers`` of them would save more than
    :data:`CLUSTER_START_SECONDS` over this process alone, else here too. A task is one of
    :func:`batches`' equal runs of cells, so the first is a fair sample of the rest."""
    started: list[Any] = []

    def run(tasks: Sequence[Delayed], desc: str, sizes: Sequence[int],
            unit: str = "cell") -> list[Any]:
        with progress(sum(sizes), desc, unit) as bar:
            if started:
                return _distributed(started[0], tasks, sizes, bar)
            begin = time.perf_counter()
            with _one_thread():
                values = _here(tasks[:1], sizes[:1], bar)
            took = time.perf_counter() - begin
            rest = took * (len(tasks) - 1)
            if rest * (1.0 - 1.0 / n_workers) > CLUSTER_START_SECONDS:
                bar.write(f"{stage_desc(desc)}: the first of {len(tasks)} batches took "
                          f"{took:.2f} s here; the rest on a local cluster of {n_workers} "
                          "workers")
                started.append(client())
                return values + _distributed(started[0], tasks[1:], sizes[1:], bar)
            with _one_thread():
                return values + _here(tasks[1:], sizes[1:], bar)

    return run


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
    """Dask on Ray when a Ray address is configured, else a local distributed cluster on 127.0.0.1.

    Yields a :class:`Run`: ``run(tasks, desc, sizes)``.
    """
    if ray_address(compute_cfg):
        # imports Ray: only here, so that a local run and the workers unpickling the stages'
        # tasks (whose modules import this one) do not pay for it
        from pipeline.runtime.executor import init_ray

        init_ray(compute_cfg)
        yield _run_ray()
        return
    if n_workers == 1:
        with _one_thread():
            yield _run_here()
        return
    from distributed import Client, LocalCluster

    # One single-threaded worker per core: torch's spinning OpenMP threads in several workers
    # would fight over the cores (the stats engine ran 3-6x slower that way here).
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    with contextlib.ExitStack() as stack:
        def client() -> Any:
            cluster = stack.enter_context(LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, host=LOOPBACK,
                dashboard_address=None, env=env, silence_logs=logging.ERROR))
            return stack.enter_context(Client(cluster))

        if (problem := dask_cluster_problem()) is not None:
            raise ValueError(problem)
        always = os.environ.get(DASK_CLUSTER_ENV) == "always"
        yield _run_distributed(client()) if always else _run_measured(n_workers, client)

