"""The one task wrapper of the Dask graphs: errors become Failed values that flow, not raise."""

from __future__ import annotations

import pickle

import dask
import pytest

from pipeline.runtime.cells.task import CellDataError, Failed, failure, task

calls: list[str] = []


@task()
def _double(x: int) -> int:
    calls.append("double")
    if x < 0:
        raise CellDataError(f"x = {x}: negative")
    if x == 0:
        raise ZeroDivisionError("zero")
    return 2 * x


@task("extra")
def _add(x: int, extra: int | None) -> int:
    calls.append("add")
    return x + (extra or 0)


@task()
def _total(parts: list[int]) -> int:
    return sum(parts)


def test_an_error_becomes_the_reason():
    assert _double(-1) == Failed("x = -1: negative")  # our checks' message as it is
    assert _double(0) == Failed("ZeroDivisionError: zero")  # anything else with its type
    assert _double(3) == 6


def test_a_failed_input_is_returned_without_running_the_task():
    calls.clear()
    assert _add(Failed("bad read"), 1) == Failed("bad read")
    assert calls == []
    assert _total([1, Failed("block 2"), 3]) == Failed("block 2")  # also inside a list


def test_an_optional_failed_input_arrives_as_none():
    assert _add(2, extra=Failed("no positives")) == 2
    assert _add(2, Failed("no positives")) == 2  # positional alike
    assert _add(2, [Failed("x")]) == 2


def test_failure_finds_the_failed_value():
    f = Failed("r")
    assert failure(f) is f and failure((1, f)) is f and failure([1, 2]) is None
    assert failure("a string is not a failure") is None


def test_unknown_optional_name_is_an_error():
    def f(x: int) -> int:
        return x

    with pytest.raises(TypeError, match=r"task\(optional=\['nope'\]\): not parameters of f"):
        task("nope")(f)


def test_tasks_pickle_by_reference_for_worker_processes():
    assert pickle.loads(pickle.dumps(_double)) is _double
    assert pickle.loads(pickle.dumps(Failed("r"))) == Failed("r")


def test_one_failing_branch_leaves_the_others_in_one_compute():
    branches = [dask.delayed(_add)(dask.delayed(_double)(x), 1) for x in (1, -2, 3)]
    (got,) = dask.compute(branches, scheduler="synchronous")
    assert got == [3, Failed("x = -2: negative"), 7]
