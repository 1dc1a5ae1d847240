"""scheduler(): where a stage's tasks run. On Linux, several local workers are processes forked
from this one (Dask's multiprocessing scheduler), which hold what ``run.share`` read before they
started; elsewhere the first task runs here, timed, and the real local Dask cluster starts only
when the rest would gain more from it than it costs; ``$CBENCH_DASK_CLUSTER=always`` starts that
cluster at once."""

from __future__ import annotations

import os
import re
import sys
import time

import numpy as np
import pytest
from dask import delayed

from pipeline.config import ConfigError, from_mapping
from pipeline.runtime.backends import scheduler as sched

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="forked workers: Linux only")


def _pid_after(seconds: float, i: int) -> tuple[int, int]:
    time.sleep(seconds)
    return i, os.getpid()


def _tasks(n: int, seconds: float) -> list:
    return [delayed(_pid_after)(seconds, i, dask_key_name=f"t-{i}") for i in range(n)]


@pytest.fixture
def measured(monkeypatch):
    """The path of a platform without fork: the first task timed here, a cluster if it pays."""
    monkeypatch.setattr(sched, "FORK", False)


def test_small_work_stays_in_this_process(tiny_params, measured):
    compute = from_mapping(tiny_params).compute
    with sched.scheduler(compute, n_workers=2) as run:
        got = run(_tasks(12, 0.0), "tiny", [1] * 12)
    assert [i for i, _ in got] == list(range(12))  # in order
    assert {pid for _, pid in got} == {os.getpid()}  # no cluster was started


def test_work_that_pays_for_a_cluster_goes_to_it(tiny_params, measured, monkeypatch):
    monkeypatch.setattr(sched, "CLUSTER_START_SECONDS", 0.2)
    compute = from_mapping(tiny_params).compute
    with sched.scheduler(compute, n_workers=2) as run:
        # the first task: 0.1 s here; the other 7 would save 7 × 0.1 × (1 − 1/2) = 0.35 s > 0.2
        got = run(_tasks(8, 0.1), "heavy", [1] * 8)
        again = run(_tasks(3, 0.0), "again", [1] * 3)  # the cluster is up: all of it there
    assert [i for i, _ in got] == list(range(8))
    assert got[0][1] == os.getpid()
    assert all(pid != os.getpid() for _, pid in got[1:] + again)


def test_always_starts_the_cluster_and_a_bad_value_is_named(tiny_params, monkeypatch):
    compute = from_mapping(tiny_params).compute
    monkeypatch.setenv("CBENCH_DASK_CLUSTER", "always")
    with sched.scheduler(compute, n_workers=2) as run:
        got = run(_tasks(2, 0.0), "always", [1, 1])
    assert all(pid != os.getpid() for _, pid in got)
    monkeypatch.setenv("CBENCH_DASK_CLUSTER", "sometimes")
    message = "$CBENCH_DASK_CLUSTER = 'sometimes': allowed: auto, always"
    with pytest.raises(ConfigError, match=re.escape(message)):  # the params, before any work
        from_mapping(tiny_params)
    with pytest.raises(ValueError, match=re.escape(message)), \
            sched.scheduler(compute, n_workers=2):
        pass


# --- forked workers (Linux) -------------------------------------------------------------------

def _worker_view(token, i: int) -> tuple[int, int, float, int, int]:
    """(i, pid, the shared array's sum, its address, torch's threads) as a worker sees them."""
    import torch

    value = sched.shared(token)
    return i, os.getpid(), float(value.sum()), value.__array_interface__["data"][0], \
        torch.get_num_threads()


@linux_only
def test_forked_workers_run_the_tasks_in_order_on_one_thread_each(tiny_params):
    compute = from_mapping(tiny_params).compute
    with sched.scheduler(compute, n_workers=2) as run:
        got = run(_tasks(12, 0.01), "forked", [1] * 12)
        pids = {pid for _, pid in got}
        threads = run([delayed(lambda: __import__("torch").get_num_threads())(
            dask_key_name=f"n-{i}") for i in range(4)], "threads", [1] * 4)
    assert [i for i, _ in got] == list(range(12))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # the workers, not this process
    assert threads == [1, 1, 1, 1]


@linux_only
def test_a_shared_value_is_read_once_here_and_held_by_the_workers(tiny_params):
    compute = from_mapping(tiny_params).compute
    calls: list[int] = []

    def make(n: int) -> np.ndarray:
        calls.append(os.getpid())
        return np.arange(n, dtype=np.float64)

    with sched.scheduler(compute, n_workers=2) as run:
        token = run.share("data", make, 1000)
        assert isinstance(token, sched.Shared)  # the graph holds a name, not the array
        address = sched.shared(token).__array_interface__["data"][0]
        got = run([delayed(_worker_view)(token, i, dask_key_name=f"v-{i}") for i in range(6)],
                  "shared", [1] * 6)
        # a second value after the workers started: they are forked anew and hold both
        token2 = run.share("more", make, 10)
        again = run([delayed(_worker_view)(token2, i, dask_key_name=f"w-{i}") for i in range(4)],
                    "again", [1] * 4)
    assert calls == [os.getpid(), os.getpid()]  # each made once, here
    assert all(total == 999 * 1000 / 2 for _, _, total, _, _ in got)
    assert all(pid != os.getpid() for _, pid, _, _, _ in got)
    # the workers' copy is this process's pages at the same address (fork), not an unpickled one
    assert {addr for _, _, _, addr, _ in got} == {address}
    assert all(total == 45.0 for _, _, total, _, _ in again)
    assert not {pid for _, pid, *_ in got} & {pid for _, pid, *_ in again}
    assert "data" not in sched._SHARED and "more" not in sched._SHARED  # released at the end


def _fail(i: int) -> int:
    if i == 3:
        raise RuntimeError(f"task {i} broke")
    return i


@linux_only
def test_a_worker_error_is_raised_here_and_one_task_stays_here(tiny_params):
    compute = from_mapping(tiny_params).compute
    with sched.scheduler(compute, n_workers=2) as run:
        with pytest.raises(RuntimeError, match="task 3 broke"):
            run([delayed(_fail)(i, dask_key_name=f"f-{i}") for i in range(6)], "fail", [1] * 6)
        (one,) = run(_tasks(1, 0.0), "one", [1])
    assert one[1] == os.getpid()  # a single task is not worth a fork
