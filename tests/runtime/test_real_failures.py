"""Environment failures raised for real inside a real forked worker — torch's CPU allocator out
of memory, ``MemoryError``, too many open files, a hung cell — are classified ``environment``,
retried there with back-off up to ``compute.max_retries`` and, past it, recorded with class and
reason; a cell's own bug is recorded at once, not retried; the rest of the grid goes on.

The faults come from ``worker_fault_plugin.py``: real limits (``RLIMIT_AS``, ``RLIMIT_NOFILE``)
and real calls, so the exception each test sees is the one the machine raises."""

from __future__ import annotations

import pytest

from pipeline.runtime.backends import cell_workers
from pipeline.runtime.cells.failures import CELL, ENVIRONMENT, RetryPolicy
from pipeline.runtime.store import files, layout
from tests.runtime.test_cell_workers import _grid, _run

pytestmark = pytest.mark.skipif(not cell_workers.FORK, reason="forked workers: Linux only")


def _faulty(tiny_params, tmp_path, monkeypatch, loss, times, max_retries=2, timeout=None):
    monkeypatch.delenv("CBENCH_TRAIN_WORKERS", raising=False)
    monkeypatch.setenv("CBENCH_FAULT_DIR", str(tmp_path))
    monkeypatch.setenv("CBENCH_FAULT_TIMES", str(times))
    tiny_params["compute"].update(retry_backoff_s=0.05, cell_timeout_s=timeout)
    params, cells, dataset = _grid(tiny_params, losses=("infonce", loss), seeds=(0,),
                                   max_retries=max_retries)
    got = _run(params, cells, dataset, tmp_path / "cells")
    (mine,) = [c for c in cells if c.loss == loss]
    (other,) = [c for c in cells if c.loss != loss]
    assert got[other.cell_id].status == "ok", got[other.cell_id].reason  # the grid goes on
    record = files.read_json(tmp_path / "cells" / mine.cell_id / layout.RECORD)
    return got[mine.cell_id], record


@pytest.mark.parametrize(("loss", "words"), [
    ("torch_oom", "can't allocate memory"),
    ("memory_error", "MemoryError"),
    ("too_many_files", "Too many open files"),
])
def test_a_real_environment_failure_is_retried_and_then_trains(tiny_params, tmp_path,
                                                                monkeypatch, loss, words):
    outcome, record = _faulty(tiny_params, tmp_path, monkeypatch, loss, times=1)
    assert outcome.status == record["status"] == "ok", outcome.reason
    assert record["attempts"] == 2
    (retried,) = record["retried"]
    assert words in retried["reason"], retried


@pytest.mark.parametrize("loss", ["torch_oom", "too_many_files"])
def test_a_persisting_environment_failure_is_recorded_with_its_class(tiny_params, tmp_path,
                                                                      monkeypatch, loss):
    outcome, record = _faulty(tiny_params, tmp_path, monkeypatch, loss, times=100,
                              max_retries=1)
    assert outcome.status == record["status"] == "failed"
    assert outcome.failure_class == record["failure_class"] == ENVIRONMENT
    assert record["attempts"] == 2 and len(record["retried"]) == 1
    assert len(list(tmp_path.glob("fault-*"))) == 2  # the first try and one retry, no more


def test_a_cells_own_failure_is_not_retried(tiny_params, tmp_path, monkeypatch):
    outcome, record = _faulty(tiny_params, tmp_path, monkeypatch, "shape_error", times=0)
    assert outcome.status == "failed" and outcome.failure_class == record["failure_class"] == CELL
    assert record["attempts"] == 1 and "retried" not in record
    assert "shapes cannot be multiplied" in record["reason"]


def test_a_hung_cell_ends_at_its_timeout_and_is_retried(tiny_params, tmp_path, monkeypatch):
    outcome, record = _faulty(tiny_params, tmp_path, monkeypatch, "hang", times=1, timeout=3.0)
    assert outcome.status == "ok", outcome.reason
    (retried,) = record["retried"]
    assert retried["reason"].startswith("CellTimeout: ") and "cell_timeout_s = 3 s" in \
        retried["reason"]
    assert 2.5 < retried["wall_seconds"] < 60  # ended by the timer, not the ten-minute sleep


def test_a_cell_stuck_where_its_timeout_cannot_reach_is_killed(tiny_params, tmp_path,
                                                                monkeypatch):
    """SIGALRM blocked (as in a C call that never returns): the driver kills the worker once
    the policy's worst case has passed, and the cell is retried on a new worker."""
    outcome, _ = _faulty(tiny_params, tmp_path, monkeypatch, "hang_in_c", times=1, max_retries=1,
                         timeout=2.0)
    assert outcome.status == "ok", outcome.reason
    assert len(list(tmp_path.glob("fault-*"))) == 1


def test_a_cell_stuck_every_time_fails_as_a_timeout(tiny_params, tmp_path, monkeypatch):
    monkeypatch.delenv("CBENCH_TRAIN_WORKERS", raising=False)
    monkeypatch.setenv("CBENCH_FAULT_DIR", str(tmp_path))
    monkeypatch.setenv("CBENCH_FAULT_TIMES", "100")
    tiny_params["compute"].update(retry_backoff_s=0.05, cell_timeout_s=1.0)
    params, cells, dataset = _grid(tiny_params, losses=("hang_in_c",), seeds=(0,),
                                   max_retries=0)
    (outcome,) = _run(params, cells, dataset, tmp_path / "cells").values()
    assert outcome.status == "failed" and outcome.failure_class == ENVIRONMENT
    assert outcome.reason.startswith("CellTimeout: ") and "cell_timeout_s = 1" in outcome.reason


def test_the_back_off_doubles_and_is_capped():
    policy = RetryPolicy(max_retries=3, backoff_s=2.0, timeout_s=10.0)
    assert [policy.wait_before(r) for r in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert RetryPolicy(9, 50.0).wait_before(5) == RetryPolicy.MAX_WAIT_S
    assert policy.worst_case_s() == 4 * 10.0 + 2.0 + 4.0 + 8.0
    assert RetryPolicy(3, 1.0).worst_case_s() is None
