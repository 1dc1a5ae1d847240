"""Where the train stage's cells run: processes forked from the stage, or Ray tasks.

:func:`run_cells` runs a local CPU grid on worker processes *forked* from the train stage
(:func:`forked`), and everything else on Ray (:func:`pipeline.runtime.backends.executor.run_cells`):
a cluster, cells that ask for GPUs (Ray packs them), cells on several torch threads, and any grid
when ``$CBENCH_TRAIN_WORKERS`` is ``ray``. A forked worker starts in a fraction of a second with
the stage's imports (torch, and under the warm interpreter ``torch._dynamo`` too), where a local
Ray instance has to start, start a worker per core, let each import torch, and shut down:
seconds, more than many tiny cells' own training (docs/speed.md).

The forked workers keep Ray's contract for a local run:

- one cell per worker at a time, ``floor(cores / compute.num_cpus)`` workers; each cell's
  :func:`pipeline.runtime.cells.one_cell.run_cell` writes its files and never raises for a failing
  cell;
- a cell its environment fails (out of memory, too many open files, a timeout) is retried by
  its worker with back-off (:class:`pipeline.runtime.cells.failures.RetryPolicy`), as in a Ray task;
- a worker that dies under a cell (killed, out of memory), or runs it past the longest its
  ``compute.cell_timeout_s`` and retries allow (stuck in C code, where the timeout cannot reach:
  killed), loses only that cell, which is retried on a fresh worker after the back-off, up to
  ``compute.max_retries`` times, and then returned failed, class ``environment``, with no
  record (the next run trains it again), as Ray does with a lost worker;
- the workers see no GPU (``CUDA_VISIBLE_DEVICES`` empty), as Ray hides them from a task that
  asks for none, and die with the stage (``PR_SET_PDEATHSIG``), as Ray's raylet takes its workers
  down with their driver;
- ``on_done`` is called here, in the stage, as each cell finishes, behind the same progress bar.

Why only one torch thread: GNU OpenMP's thread pool does not survive a fork, and a child that
starts a parallel region after its parent used one hangs (seen here with torch 2.14); a cell on
one thread never starts one. ``train.threads`` above 1 runs on Ray.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from pipeline.config import Cell, ComputeConfig
from pipeline.config.rules import TRAIN_WORKERS_ENV, local_cores, train_workers_problem
from pipeline.datasets import Dataset
from pipeline.plugins import load_plugins
from pipeline.runtime.backends.addresses import ray_address
from pipeline.runtime.backends.following import follow
from pipeline.runtime.cells.failures import ENVIRONMENT, RetryPolicy
from pipeline.runtime.cells.one_cell import CellOutcome, prepare_worker, run_cell

FORK = sys.platform.startswith("linux")  # fork is the safe default only on Linux
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent thread exits


def forked(compute: ComputeConfig, threads: int) -> bool:
    """Whether :func:`run_cells` forks local workers (see the module docstring): on Linux, for
    a local run (no Ray address), cells that ask for no GPU and run torch on one thread, unless
    ``$CBENCH_TRAIN_WORKERS`` is ``ray``."""
    if (problem := train_workers_problem()) is not None:
        raise ValueError(problem)
    return (FORK and os.environ.get(TRAIN_WORKERS_ENV, "auto") == "auto"
            and ray_address(compute) is None and compute.num_gpus == 0 and threads == 1)


def run_cells(cells: Sequence[Cell], dataset: Dataset, folders: Mapping[str, str | Path],
              metas: Mapping[str, Mapping[str, Any]], compute: ComputeConfig, threads: int,
              snapshot_epochs: Sequence[int], on_done: Callable[[CellOutcome], None],
              plugins: Sequence[str] = (), ready: Callable[[], object] | None = None
              ) -> list[CellOutcome]:
    """Run every cell writing to its folder, on forked workers where :func:`forked` says so,
    else as Ray tasks; ``on_done`` is called here as each one finishes. ``metas``: each cell's
    record fields (git commit, version, fingerprint). ``ready``: called before any cell starts
    (the driver waits there for its MLflow store, which opens meanwhile)."""
    if not forked(compute, threads):
        from pipeline.runtime.backends import (
            executor,  # imports Ray: only for the cells that use it
        )

        return executor.run_cells(cells, dataset, folders, metas, compute, threads,
                                  snapshot_epochs, on_done, plugins, ready)
    if not cells:
        return []
    if ready is not None:
        ready()  # before the fork: the store's thread is done, no lock of it held in a child
    slots = max(1, min(len(cells), int(local_cores() // compute.num_cpus)))
    jobs = [_Job(c, str(folders[c.cell_id]), metas[c.cell_id]) for c in cells]
    print(f"train: {len(cells)} cells on {slots} worker processes forked from this stage "
          f"(${TRAIN_WORKERS_ENV}=ray runs them on Ray)", file=sys.stderr)
    load_plugins(plugins)  # here, before the fork: every worker inherits the registered losses
    prepare_worker()  # and the one-off imports (cached: a no-op where they were paid before)
    policy = RetryPolicy(compute.max_retries, compute.retry_backoff_s, compute.cell_timeout_s)
    with _Workers(jobs, dataset, threads, list(snapshot_epochs), slots, policy) as pool:
        return follow(pool.outcomes(), len(cells), slots, on_done)


@dataclass(frozen=True)
class _Job:
    cell: Cell
    folder: str
    meta: Mapping[str, Any]


@dataclass
class _Worker:
    process: Any  # multiprocessing's forked Process
    conn: Connection
    job: int | None = None  # the index of the cell it trains now


class _Workers:
    """``slots`` worker processes forked from this one, each holding every job and the dataset
    (inherited, never copied): a job is sent as its index, an outcome comes back."""

    def __init__(self, jobs: Sequence[_Job], dataset: Dataset, threads: int,
                 snapshot_epochs: list[int], slots: int, policy: RetryPolicy):
        self.jobs, self.dataset, self.threads = jobs, dataset, threads
        self.snapshot_epochs, self.slots, self.policy = snapshot_epochs, slots, policy
        self.context = multiprocessing.get_context("fork")
        self.workers: list[_Worker] = []

    def __enter__(self) -> _Workers:
        for _ in range(self.slots):
            self.workers.append(self._fork())
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.workers:  # an idle worker ends when asked; a busy one (an error here,
            with contextlib.suppress(OSError):  # Ctrl-C) is stopped with its cell
                if w.job is None:
                    w.conn.send(None)
                else:
                    w.process.terminate()
        for w in self.workers:
            w.process.join(timeout=10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
        self.workers = []

    def _fork(self) -> _Worker:
        here, there = self.context.Pipe()
        process = self.context.Process(
            target=_serve, args=(there, os.getpid(), self.jobs, self.dataset, self.threads,
                                 self.snapshot_epochs, self.policy),
            name="cbench-cell-worker", daemon=True)
        process.start()
        there.close()
        return _Worker(process, here)

    def outcomes(self) -> Iterator[CellOutcome]:
        """Every job's outcome, as they finish. A worker retries its cell's environment failures
        itself (:func:`pipeline.runtime.cells.one_cell.run_cell`); a cell whose worker died, or ran
        past the policy's worst case (stuck where its timeout cannot reach it: killed here), is
        tried again on a new worker after the policy's back-off, at most ``max_retries`` times, then
        failed (environment, no record: the next run trains it again)."""
        policy = self.policy
        queue = collections.deque(range(len(self.jobs)))
        lost: collections.Counter[int] = collections.Counter()
        due: dict[int, float] = {}  # a lost job's earliest restart (its back-off)
        started: dict[int, float] = {}  # a running job's start
        limit = policy.worst_case_s()
        while queue or any(w.job is not None for w in self.workers):
            now = time.monotonic()
            for w in self.workers:
                ready_jobs = [j for j in queue if due.get(j, 0.0) <= now]
                if w.job is None and ready_jobs:
                    queue.remove(ready_jobs[0])
                    w.job, started[ready_jobs[0]] = ready_jobs[0], now
                    with contextlib.suppress(OSError):  # it died idle: lost below, retried
                        w.conn.send(w.job)
            busy = [w for w in self.workers if w.job is not None]
            wake = [due[j] for j in queue if j in due]
            if limit is not None:
                wake += [started[w.job] + limit for w in busy if w.job is not None]
            timeout = max(0.0, min(wake) - time.monotonic()) if wake else None
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                             timeout))
            for w in busy:
                job = w.job
                assert job is not None
                overdue = limit is not None and time.monotonic() - started[job] > limit
                if w.conn not in ready and w.process.sentinel not in ready and not overdue:
                    continue
                got = self._receive(w)
                if got is not None:
                    w.job = None
                    yield got
                    continue
                if overdue:  # stuck where its own timeout does not reach: stopped here
                    w.process.kill()
                lost[job] += 1
                self._replace(w, bool(queue) or lost[job] <= policy.max_retries)
                if lost[job] <= policy.max_retries:
                    queue.appendleft(job)
                    due[job] = time.monotonic() + policy.wait_before(lost[job])
                else:
                    yield _lost(self.jobs[job].cell, w.process.exitcode, lost[job], policy,
                                overdue)

    @staticmethod
    def _receive(w: _Worker) -> CellOutcome | None:
        """The worker's outcome, or None when it died before sending one."""
        try:
            if w.conn.poll():
                _, outcome = w.conn.recv()
                return outcome  # type: ignore[no-any-return]
        except (EOFError, OSError):
            pass
        return None

    def _replace(self, dead: _Worker, again: bool) -> None:
        """``dead`` joined and, when more cells are to run (``again``), a new worker forked in
        its place (it inherits the jobs and the dataset, as the first ones did)."""
        dead.process.join()
        dead.conn.close()
        self.workers.remove(dead)
        if again:
            self.workers.append(self._fork())


def _lost(cell: Cell, exitcode: int | None, times: int, policy: RetryPolicy,
          overdue: bool) -> CellOutcome:
    how = (f"killed by {signal.Signals(-exitcode).name}" if exitcode is not None and exitcode < 0
           else f"exit status {exitcode}")
    if overdue:
        how = (f"stopped after {policy.worst_case_s():g} s, the most compute.cell_timeout_s = "
               f"{policy.timeout_s:g} allows with its retries: the cell did not end at its "
               "timeout")
    name = "CellTimeout" if overdue else "WorkerCrashedError"
    return CellOutcome(cell.cell_id, "failed",
                       f"{name}: the worker process training this cell died ({how}), "
                       f"{times} times in all (compute.max_retries = {policy.max_retries})",
                       failure_class=ENVIRONMENT)  # no record: retried next run


def _die_with(parent: int) -> None:
    """This process gets SIGKILL when the stage that forked it dies (Linux's prctl), as a Ray
    worker dies with its driver; and ends now if that happened before this call."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _serve(conn: Connection, parent: int, jobs: Sequence[_Job], dataset: Dataset, threads: int,
           snapshot_epochs: Sequence[int], policy: RetryPolicy) -> None:
    """A worker: trains the job whose index it is sent, sends back ``(index, outcome)``, until
    it is sent None or the stage is gone. The plugins' losses and the one-off imports it
    inherits from the stage (:func:`run_cells` loads them before forking)."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the stage's to handle: it stops us
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # as Ray hides the GPUs from a task asking for none
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # NumPy's BLAS on one thread too: the parent's pools did not survive
    while True:
        try:
            index = conn.recv()
        except (EOFError, OSError):
            return
        if index is None:
            return
        job = jobs[index]
        outcome = run_cell(job.cell, dataset, job.folder, job.meta, threads, snapshot_epochs,
                           policy)
        conn.send((index, outcome))
