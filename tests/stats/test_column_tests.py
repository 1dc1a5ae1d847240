import numpy as np
import pytest

from pipeline.stats import (
    ColumnTests,
    ad_critical_5pct,
    anderson_darling,
    column_tests,
    concat_column_tests,
    dagostino_pearson,
)


def test_equals_separate_functions(rng):
    x = rng.laplace(size=(500, 9)).astype(np.float32)
    res = column_tests(x)
    stat, p = dagostino_pearson(x)
    np.testing.assert_allclose(res.ad, anderson_darling(x), rtol=1e-12)
    np.testing.assert_allclose(res.dp_stat, stat, rtol=1e-12)
    np.testing.assert_allclose(res.dp_p, p, rtol=1e-12)
    # column_tests sums the sorted columns, dagostino_pearson the unsorted ones: p agrees to
    # rounding, so the pass flags agree wherever p is not within that rounding of 0.05
    assert np.all(np.abs(p - 0.05) > 1e-9)
    np.testing.assert_array_equal(res.dp_pass, p > 0.05)


def test_concat_of_blocks_equals_whole(rng):
    x = rng.standard_t(5, size=(400, 23))
    whole = column_tests(x)
    parts = [column_tests(x[:, s : s + 5]) for s in range(0, 23, 5)]
    joined = concat_column_tests(parts)
    # The concatenation is exact, but a block of 5 columns need not round like a block of 23
    # (BLAS kernel, reduction split and row alignment depend on the block shape and threads):
    # each statistic is O(1) from sums of N terms, so it may move by ~N·eps (see test_anderson).
    atol = 100 * x.shape[0] * float(np.finfo(np.float64).eps)
    for field in ("ad", "dp_stat", "dp_p"):
        np.testing.assert_allclose(getattr(joined, field), getattr(whole, field), rtol=0, atol=atol)
    # the pass flags can only differ for a column within atol of its threshold; there is none
    assert np.all(np.abs(whole.ad - ad_critical_5pct(x.shape[0])) > atol)
    assert np.all(np.abs(whole.dp_p - 0.05) > atol)
    np.testing.assert_array_equal(joined.ad_pass, whole.ad_pass)
    np.testing.assert_array_equal(joined.dp_pass, whole.dp_pass)


def test_concat_empty_raises():
    with pytest.raises(ValueError, match=r"parts = \[\]"):
        concat_column_tests([])


def test_block_must_be_2d():
    with pytest.raises(ValueError, match=r"block.shape = \(5,\): expected a 2-D"):
        column_tests(np.zeros(5))


def test_frozen(rng):
    res = column_tests(rng.normal(size=(20, 2)))
    assert isinstance(res, ColumnTests)
    with pytest.raises(AttributeError):
        res.ad = None


def test_calibration_on_gaussian_data():
    # SPEC §2: exactly Gaussian coordinates give mean A² ≈ 0.39 and ~95% passes per test
    x = np.random.default_rng(7).standard_normal((2000, 400))
    res = column_tests(x)
    assert abs(res.ad_pass.mean() - 0.95) <= 0.03
    assert abs(res.dp_pass.mean() - 0.95) <= 0.03
    assert abs(res.ad.mean() - 0.39) <= 0.04


def test_thread_count_changes_results_only_by_rounding(rng):
    import os

    import torch

    if os.environ.get("CBENCH_TEST_THREADS", "").strip():  # the conftest hook took effect
        assert torch.get_num_threads() == int(os.environ["CBENCH_TEST_THREADS"])
    x = rng.laplace(size=(50_000, 3))  # past torch's grain size: reductions may split on threads
    threads = torch.get_num_threads()
    try:
        runs = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            runs.append(column_tests(x))
    finally:
        torch.set_num_threads(threads)
    atol = 100 * x.shape[0] * float(np.finfo(np.float64).eps)  # ~N·eps: see above
    for other in runs[1:]:
        for field in ("ad", "dp_stat", "dp_p"):
            np.testing.assert_allclose(getattr(other, field), getattr(runs[0], field), rtol=0,
                                       atol=atol)
