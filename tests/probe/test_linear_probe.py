"""Linear probe against scikit-learn: LogisticRegression(lbfgs) on StandardScaler features."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from pipeline.probe import fit_logistic, linear_probe, predict, standardize, validation_split
from pipeline.stats.intervals import wilson_interval

sklearn = pytest.importorskip("sklearn")
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

IDS = np.array([10, -3, 7, 42])  # arbitrary class ids; sorted order -3, 7, 10, 42
GRID = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0]
# Both solvers stop where float64 loss differences vanish (max |gradient| ~ 2e-8 here, also for
# sklearn at tol 1e-10); ours runs at tol 1e-7. Two such solutions differ by about
# gradient / (smallest Hessian eigenvalue), which grows as the penalty 1/(Cn) shrinks:
COEF_ATOL = {1e-2: 1e-6, 1.0: 1e-5, 100.0: 1e-4}
TOL = 1e-7


def _blobs(rng, n, d=12, scale=1.5, shift=0.0):
    """Overlapping Gaussian classes (not separable), raw features off-centre and unequally
    scaled."""
    means = np.random.default_rng(7).normal(size=(4, d))
    y = rng.integers(0, 4, n)
    x = (means[y] + scale * rng.normal(size=(n, d))) * np.linspace(0.1, 10, d) + shift
    return x, IDS[y]


def _sk(x, y, c, tol=1e-10):
    return LogisticRegression(C=c, tol=tol, max_iter=100_000).fit(x, y)


@pytest.mark.parametrize("c", [1e-2, 1.0, 100.0])
def test_fit_equals_sklearn(rng, c):
    x, y = _blobs(rng, 300)
    xs = StandardScaler().fit_transform(x)
    ids = np.searchsorted(np.unique(y), y)
    fit = fit_logistic(torch.from_numpy(xs), torch.from_numpy(ids), 4, c, tol=TOL,
                       max_iter=10_000)
    ref = _sk(xs, y, c)
    assert fit.converged
    np.testing.assert_allclose(fit.coef, ref.coef_, rtol=0, atol=COEF_ATOL[c])
    # the intercept is only defined up to a constant shared by the classes: compare centred
    np.testing.assert_allclose(fit.intercept - fit.intercept.mean(),
                               ref.intercept_ - ref.intercept_.mean(), rtol=0, atol=COEF_ATOL[c])
    x_new, _ = _blobs(rng, 500)
    xs_new = StandardScaler().fit(x).transform(x_new)
    pred = np.unique(y)[predict(fit, torch.from_numpy(xs_new)).numpy()]
    np.testing.assert_array_equal(pred, ref.predict(xs_new))


def test_float32_features_fit_equals_sklearn_to_float32_accuracy(rng):
    x, y = _blobs(rng, 2000)
    xs = StandardScaler().fit_transform(x)
    ids = np.searchsorted(np.unique(y), y)
    fit = fit_logistic(torch.from_numpy(xs).float(), torch.from_numpy(ids), 4, 1.0, tol=1e-5)
    ref = _sk(xs, y, 1.0)
    # float32 matmuls: gradient stops near 1e-5, coefficients of size ~1 agree to ~1e-4
    np.testing.assert_allclose(fit.coef, ref.coef_, rtol=0, atol=1e-3)
    pred = predict(fit, torch.from_numpy(xs).float()).numpy()
    assert np.mean(np.unique(y)[pred] == ref.predict(xs)) >= 0.999


def test_warm_start_reaches_the_same_solution(rng):
    x, y = _blobs(rng, 300)
    (xs,) = standardize(torch.from_numpy(x))
    ids = torch.from_numpy(np.searchsorted(np.unique(y), y))
    cold = fit_logistic(xs, ids, 4, 10.0, tol=TOL, max_iter=10_000)
    start = fit_logistic(xs, ids, 4, 0.01, tol=TOL, max_iter=10_000)
    warm = fit_logistic(xs, ids, 4, 10.0, tol=TOL, max_iter=10_000, init=start)
    assert cold.converged and warm.converged
    np.testing.assert_allclose(warm.coef, cold.coef, rtol=0, atol=1e-4)  # C = 10: see COEF_ATOL


def test_standardize_equals_standard_scaler_and_keeps_constant_columns_finite(rng):
    x = rng.normal(size=(50, 4)) * [1.0, 100.0, 1e-3, 0.0] + [0.0, -5.0, 3.0, 7.0]
    other = rng.normal(size=(9, 4))
    scaler = StandardScaler().fit(x)
    got, got_other = standardize(torch.from_numpy(x), torch.from_numpy(other))
    np.testing.assert_allclose(got.numpy(), scaler.transform(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_other.numpy(), scaler.transform(other), rtol=0, atol=1e-9)
    assert np.all(got.numpy()[:, 3] == 0.0)  # constant column: centred, not divided by 0
    x32 = x.astype(np.float32)
    (f32,) = standardize(torch.from_numpy(x32))
    assert f32.dtype == torch.float32  # float64 arithmetic, one rounding to float32 at the end
    np.testing.assert_allclose(f32.numpy(), StandardScaler().fit_transform(x32.astype(np.float64)),
                               rtol=1e-6, atol=1e-6)


def test_validation_split_is_seeded_and_stratified():
    labels = np.repeat([0, 1, 2, 3], [10, 5, 2, 1])
    fit, val = validation_split(labels, 0.2, np.random.default_rng(3))
    fit2, val2 = validation_split(labels, 0.2, np.random.default_rng(3))
    np.testing.assert_array_equal(val, val2)
    np.testing.assert_array_equal(fit, fit2)
    assert np.array_equal(np.sort(np.concatenate([fit, val])), np.arange(18))
    # round(0.2 n_c) clipped to [1, n_c − 1]; the single row of class 3 stays in the fit part
    assert np.bincount(labels[val], minlength=4).tolist() == [2, 1, 1, 0]
    assert set(labels[fit]) == {0, 1, 2, 3}


def _sklearn_sweep(x, y, xt, yt, grid, val_fraction, seed):
    """The protocol with sklearn: the same split and scaler, every C fitted from scratch."""
    ids = np.searchsorted(np.unique(y), y)
    fit_rows, val_rows = validation_split(ids, val_fraction, np.random.default_rng(seed))
    scaler = StandardScaler().fit(x)
    xs, xts = scaler.transform(x), scaler.transform(xt)
    val_acc = [float(np.mean(_sk(xs[fit_rows], y[fit_rows], c).predict(xs[val_rows])
                             == y[val_rows])) for c in grid]
    best = int(np.argmax(val_acc))  # first maximum: the smaller C
    accuracy = float(np.mean(_sk(xs, y, grid[best]).predict(xts) == yt))
    return val_acc, grid[best], accuracy


def test_sweep_equals_a_brute_force_loop_over_sklearn_fits(rng):
    x, y = _blobs(rng, 400, shift=3.0)
    xt, yt = _blobs(rng, 300, shift=3.0)
    res = linear_probe(x, y, xt, yt, GRID, 0.25, np.random.default_rng(11), tol=TOL,
                       max_iter=10_000, dtype=torch.float64)
    val_acc, c, accuracy = _sklearn_sweep(x, y, xt, yt, GRID, 0.25, 11)
    assert len(set(val_acc)) > 1  # the grid matters on this data
    # equal predictions (coefficients as close as COEF_ATOL), so equal accuracies, exactly
    assert res.val_accuracy == tuple(val_acc)
    assert res.c == c
    assert res.accuracy == accuracy
    correct = round(accuracy * 300)
    assert res.ci == wilson_interval(correct, 300, 0.95)
    assert (res.n_train, res.n_val, res.n_test, res.n_classes) == (400, 100, 300, 4)
    assert res.c_grid == tuple(GRID) and res.converged


def test_default_float32_probe_equals_sklearn_accuracy(rng):
    x, y = _blobs(rng, 2000, shift=3.0)
    xt, yt = _blobs(rng, 1000, shift=3.0)
    res = linear_probe(x, y, xt, yt, GRID, 0.2, np.random.default_rng(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        val_acc, c, accuracy = _sklearn_sweep(x, y, xt, yt, GRID, 0.2, 5)
    assert abs(res.accuracy - accuracy) <= 2 / 1000  # float32, tol 1e-4: at most 2 flips
    assert max(abs(a - b) for a, b in zip(res.val_accuracy, val_acc, strict=True)) <= 2 / 400


def test_ties_in_validation_accuracy_go_to_the_smallest_c(rng):
    # well separated classes: every C classifies the validation part perfectly
    centres = 20.0 * np.eye(4, 6)
    y, yt = rng.integers(0, 4, 200), rng.integers(0, 4, 100)
    x, xt = centres[y] + rng.normal(size=(200, 6)), centres[yt] + rng.normal(size=(100, 6))
    res = linear_probe(x, y, xt, yt, [100.0, 1.0, 0.1], 0.3, np.random.default_rng(0))
    assert res.val_accuracy == (1.0, 1.0, 1.0)
    assert res.c == 0.1 and res.c_grid == (0.1, 1.0, 100.0)


def test_separable_data_gives_at_least_99_percent(rng):
    w = rng.normal(size=(10, 64))

    def draw(n):  # linearly separable by construction, with a margin: top-2 logit gap >= 3
        x = rng.normal(size=(8 * n, 64))
        top2 = np.sort(x @ w.T, axis=1)[:, -2:]
        x = x[top2[:, 1] - top2[:, 0] >= 3.0][:n]
        assert x.shape[0] == n
        return x, (x @ w.T).argmax(1)

    (x, y), (xt, yt) = draw(3000), draw(1000)
    res = linear_probe(x, y, xt, yt, GRID, 0.2, np.random.default_rng(1))
    assert res.accuracy >= 0.99, res


def test_shuffled_labels_give_chance_inside_the_interval(rng):
    x, xt = rng.normal(size=(3000, 32)), rng.normal(size=(2000, 32))
    y, yt = rng.integers(0, 10, 3000), rng.integers(0, 10, 2000)
    res = linear_probe(x, y, xt, yt, GRID, 0.2, np.random.default_rng(2))
    assert res.ci.low <= 0.1 <= res.ci.high, res


def test_label_ids_and_input_types_do_not_matter(rng):
    x, y = _blobs(rng, 300)
    xt, yt = _blobs(rng, 200)
    ref = linear_probe(x, y, xt, yt, GRID, 0.2, np.random.default_rng(4), dtype=torch.float64)
    relabelled = linear_probe(x, 3 * y + 1000, xt, 3 * yt + 1000, GRID, 0.2,
                              np.random.default_rng(4), dtype=torch.float64)
    tensors = linear_probe(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(xt),
                           torch.from_numpy(yt), GRID, 0.2, np.random.default_rng(4),
                           dtype=torch.float64, device="cpu")
    assert relabelled == ref and tensors == ref


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_probe_equals_the_cpu_probe(rng):
    x, y = _blobs(rng, 2000, shift=3.0)
    xt, yt = _blobs(rng, 1000, shift=3.0)
    cpu = linear_probe(x, y, xt, yt, GRID, 0.2, np.random.default_rng(5), dtype=torch.float64,
                       tol=TOL)
    gpu = linear_probe(torch.from_numpy(x).cuda(), y, torch.from_numpy(xt).cuda(), yt, GRID, 0.2,
                       np.random.default_rng(5), dtype=torch.float64, tol=TOL)
    assert gpu.c == cpu.c
    assert abs(gpu.accuracy - cpu.accuracy) <= 1 / 1000  # other kernels: at most one flip
