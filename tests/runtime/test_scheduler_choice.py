"""scheduler(): with several local workers the first task runs in this process, timed, and the
real local Dask cluster starts only when the rest would gain more from it than it costs."""

from __future__ import annotations

import os
import re
import time

import pytest
from dask import delayed

from pipeline.config import ConfigError, from_mapping
from pipeline.runtime import scheduler as sched


def _pid_after(seconds: float, i: int) -> tuple[int, int]:
    time.sleep(seconds)
    return i, os.getpid()


def _tasks(n: int, seconds: float) -> list:
    return [delayed(_pid_after)(seconds, i, dask_key_name=f"t-{i}") for i in range(n)]


def test_small_work_stays_in_this_process(tiny_params):
    compute = from_mapping(tiny_params).compute
    with sched.scheduler(compute, n_workers=2) as run:
        got = run(_tasks(12, 0.0), "tiny", [1] * 12)
    assert [i for i, _ in got] == list(range(12))  # in order
    assert {pid for _, pid in got} == {os.getpid()}  # no cluster was started


def test_work_that_pays_for_a_cluster_goes_to_it(tiny_params, monkeypatch):
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
