"""batches(): the Dask stages' tasks, runs of consecutive cells, about per_worker per worker."""

from __future__ import annotations

import pytest

from pipeline.runtime.backends.scheduler import BATCHES_PER_WORKER, batches


@pytest.mark.parametrize("n", [1, 2, 5, 31, 32, 33, 100, 1000, 2999])
@pytest.mark.parametrize("workers", [1, 2, 7])
def test_every_item_once_in_order_in_balanced_runs(n, workers):
    items = [f"cell-{i}" for i in range(n)]
    runs = batches(items, workers)
    assert [x for run in runs for x in run] == items  # each once, in order, consecutive
    assert len(runs) == min(n, workers * BATCHES_PER_WORKER)
    sizes = [len(run) for run in runs]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the longer runs first


def test_per_worker_sets_the_number_of_runs():
    assert [len(r) for r in batches(range(10), 2, per_worker=2)] == [3, 3, 2, 2]
    assert batches("abc", 1, per_worker=1) == [["a", "b", "c"]]
    assert batches((1, 2), 4, per_worker=8) == [[1], [2]]  # never an empty run


def test_no_items_no_runs():
    assert batches([], 3) == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n_workers": 0}, "n_workers = 0: must be an integer >= 1"),
    ({"n_workers": -2}, "n_workers = -2: must be an integer >= 1"),
    ({"n_workers": 2, "per_worker": 0}, "per_worker = 0: must be an integer >= 1"),
])
def test_bad_counts_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        batches([1, 2, 3], **kwargs)
    with pytest.raises(ValueError, match=message):
        batches([], **kwargs)  # checked before looking at the items
