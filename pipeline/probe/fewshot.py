"""Few-shot probes (label efficiency): the linear probe and the weighted kNN fitted on
``shots`` labelled examples per class, over seeded episodes.

An episode is one draw: from the labelled rows, exactly ``shots`` rows of every class, without
replacement, from a generator keyed by (cell seed, cell id, shots, episode)
(:func:`episode_generator`, through :mod:`pipeline.seeding`). The rows an episode is scored on
(its test split: the probe's held-out rows) are never drawn: the draw is made from the rows
outside them, and :func:`check_disjoint` raises if one were there anyway. CLIP_benchmark's
few-shot mode had that kind of leak (its issue #125): the rows that chose the weight decay were
added back to the training rows, so the probe saw more than k examples per class. Here nothing
but the drawn rows reaches a fit, the choice of C included (:func:`fewshot_linear_probe`).

The weighted kNN's bank is the drawn rows; where a k of ``probe.knn_k`` exceeds the bank
(shots · classes rows), every bank row votes (k = the bank's size), so ``weighted_knn_200`` at
1 shot of 10 classes is the vote of all 10 rows (:func:`fewshot_knn`).

Pure numpy/torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pipeline.probe import checks
from pipeline.probe.knn import KnnResult, weighted_knn
from pipeline.probe.linear import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    LinearProbeResult,
    LogisticFit,
    _c_grid,
    fit_logistic,
    predict,
    standardize,
)
from pipeline.seeding import derive_seed
from pipeline.stats.intervals import wilson_interval
from pipeline.stats.uncertainty import check_level

MAX_FOLDS = 5  # cross-validation folds of the C choice (fewer when shots < 5)
STREAM = "fewshot"  # the seeding stream of the episodes


def episode_seed(seed: int, cell_id: str, shots: int, episode: int) -> int:
    """The 63-bit seed of one episode: the result's key (cell, shots, episode) as a seed."""
    return derive_seed(seed, cell_id, STREAM, shots, episode)


def episode_generator(seed: int, cell_id: str, shots: int, episode: int) -> np.random.Generator:
    """The generator an episode's rows are drawn from (:func:`episode_seed`)."""
    return np.random.default_rng(episode_seed(seed, cell_id, shots, episode))


def _shots(shots: Any) -> int:
    return checks.positive_int(shots, "shots")


def class_shortfall(labels: np.ndarray, shots: int, rows_name: str = "training rows") -> str:
    """'' when every class of ``labels`` has >= ``shots`` rows, else why an episode cannot be
    drawn (each short class with its count)."""
    classes, counts = np.unique(np.asarray(labels), return_counts=True)
    short = counts < _shots(shots)
    if not short.any():
        return ""
    listed = ", ".join(f"class {c} has {n}" for c, n in zip(classes[short], counts[short],
                                                             strict=True))
    return (f"shots = {shots}: {listed} {rows_name} (fewer than {shots}); an episode needs "
            f"{shots} of every class; allowed: shots <= {int(counts.min())}")


def check_disjoint(train_rows: np.ndarray, test_rows: np.ndarray) -> None:
    """Raise ``ValueError`` if any row of an episode's training draw is one of its test rows."""
    both = np.intersect1d(np.asarray(train_rows), np.asarray(test_rows))
    if both.size:
        raise ValueError(f"train_rows and test_rows share {both.size} row(s) "
                         f"{checks.listed(both)}: an episode's training draw must hold none of "
                         "the rows it is scored on")


def draw_episode(labels: np.ndarray, shots: int, rng: np.random.Generator,
                 test_rows: np.ndarray | Sequence[int] = ()) -> np.ndarray:
    """The training rows of one episode, sorted: exactly ``shots`` rows of every class.

    labels: ``(n,)`` integer class ids of every labelled row (the training split, or the
    training split followed by the test split). test_rows: the rows the episode is scored on,
    never drawn: per class, ``shots`` rows are chosen without replacement
    (``rng.choice``) among that class's rows outside ``test_rows``, classes in sorted order.
    The classes are those of the rows outside ``test_rows``. Raises ``ValueError`` when one of
    them has fewer than ``shots`` rows there (:func:`class_shortfall`).
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    k = _shots(shots)
    y = checks.labels(labels, "labels", len(np.asarray(labels)), "the labelled rows")
    test = np.unique(np.asarray(test_rows, dtype=np.int64))
    if test.size and (test[0] < 0 or test[-1] >= y.size):
        raise ValueError(f"test_rows: values {test[0]}..{test[-1]}: expected row indices in "
                         f"0..{y.size - 1}")
    pool = np.setdiff1d(np.arange(y.size), test)  # by construction: no test row is drawable
    if pool.size == 0:
        raise ValueError(f"labels: all {y.size} rows are test rows; nothing left to draw from")
    why = class_shortfall(y[pool], k)
    if why:
        raise ValueError(why)
    drawn = [rng.choice(pool[y[pool] == c], size=k, replace=False) for c in np.unique(y[pool])]
    rows = np.sort(np.concatenate(drawn)).astype(np.int64)
    check_disjoint(rows, test)
    return rows


def _folds(y: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """A fold id per row: each class's rows, in a seeded order, dealt to folds 0, 1, ..."""
    fold = np.empty(y.size, dtype=np.int64)
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        fold[rows] = np.arange(rows.size) % n_folds
    return fold


def fewshot_linear_probe(train_x: Any, train_y: Any, test_x: Any, test_y: Any,
                         c_grid: Sequence[float], rng: np.random.Generator, *,
                         level: float = 0.95, tol: float = DEFAULT_TOL,
                         max_iter: int = DEFAULT_MAX_ITER, dtype: torch.dtype = torch.float32,
                         device: str | torch.device | None = None) -> LinearProbeResult:
    """The linear probe of :func:`pipeline.probe.linear.linear_probe` on an episode's rows only.

    train_x ``(n, d)``, train_y ``(n,)``: the drawn rows (``shots`` per class); test_x, test_y:
    the test split. Features standardised with the drawn rows' statistics, as in the full probe.

    The choice of C. The full probe holds out a validation part of the training split; with a
    few shots that part would leave a class one row or none, and fitting on labelled rows beyond
    the draw would break the label budget (the leak of CLIP_benchmark's issue #125). So C is
    chosen on the drawn rows alone:

    - shots >= 2 (the smallest class count m): stratified cross-validation over
      f = min(m, MAX_FOLDS) folds. Each class's rows, in an order drawn from ``rng``, are dealt
      to the folds in turn, so every fold holds ~m/f rows of every class and its fitting part
      keeps at least one; with m <= 5 this is leave-one-out per class (each fold holds out one
      row of every class). For each C of the grid, ascending and warm-started fold by fold, the
      held-out rows' correct predictions are summed over the folds: accuracy over all n rows.
      The best C wins, ties to the smaller C (as in the full probe).
    - shots = 1: no row can be held out without removing its class, so C is fixed to the
      smallest of the grid. At one example per class the rows are separable and a weak penalty
      only scales up a separating W; as C → 0 the fit tends to W ∝ Σ_i (e_{y_i} − 1/K) f_iᵀ, the
      class-mean (prototype) classifier, the standard one-shot baseline. No label outside the
      draw is used (the C chosen on the full data would be one).

    Then the fit on all drawn rows with that C (from zeros) is scored on the test split (top-1,
    Wilson interval). ``val_accuracy``: the cross-validated accuracy per C (empty at one shot);
    ``n_val``: the rows scored in it (n, or 0).
    """
    grid = _c_grid(c_grid)
    check_level(level)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    dev, xtr, xte, classes, ytr_np, yte_np = checks.probe_inputs(train_x, train_y, test_x,
                                                                 test_y, device, dtype)
    k, n = int(classes.size), xtr.shape[0]
    xtr, xte = standardize(xtr, xte)
    ytr = torch.from_numpy(ytr_np).to(dev)
    smallest = int(np.bincount(ytr_np, minlength=k).min())
    n_folds = min(smallest, MAX_FOLDS)
    val_acc: tuple[float, ...] = ()
    best = 0  # one shot: the smallest C
    if n_folds >= 2:
        fold = torch.from_numpy(_folds(ytr_np, n_folds, rng)).to(dev)
        correct = np.zeros(len(grid))
        for j in range(n_folds):
            fit_mask, val_mask = fold != j, fold == j
            x_fit, y_fit, x_val, y_val = (xtr[fit_mask], ytr[fit_mask], xtr[val_mask],
                                          ytr[val_mask])
            prev: LogisticFit | None = None
            for i, c in enumerate(grid):
                prev = fit_logistic(x_fit, y_fit, k, c, tol=tol, max_iter=max_iter, init=prev)
                correct[i] += int((predict(prev, x_val) == y_val).sum())
        val_acc = tuple(float(v) for v in correct / n)
        best = int(np.argmax(correct))  # first maximum: ties to the smaller C
    final = fit_logistic(xtr, ytr, k, grid[best], tol=tol, max_iter=max_iter)
    hits = int((predict(final, xte) == torch.from_numpy(yte_np).to(dev)).sum())
    return LinearProbeResult(accuracy=hits / xte.shape[0],
                             ci=wilson_interval(hits, xte.shape[0], level), c=grid[best],
                             c_grid=grid, val_accuracy=val_acc, n_train=n,
                             n_val=n if val_acc else 0, n_test=xte.shape[0], n_classes=k,
                             n_iter=final.n_iter, converged=final.converged)


def fewshot_knn(bank: Any, bank_labels: Any, queries: Any, query_labels: Any,
                k: Sequence[int], temperature: float, *, level: float = 0.95,
                device: str | torch.device | None = None) -> dict[int, KnnResult]:
    """:func:`pipeline.probe.knn.weighted_knn` with the drawn rows as the bank, per k of ``k``
    (keys as given); a k above the bank's rows is scored with every row voting (the result's
    ``k`` says how many voted)."""
    n_bank = len(bank)
    wanted = [checks.positive_int(v, f"k[{i}]") for i, v in enumerate(k)]
    used = sorted({min(v, n_bank) for v in wanted})
    res = weighted_knn(bank, bank_labels, queries, query_labels, used, temperature, level=level,
                       device=device)
    return {v: res[min(v, n_bank)] for v in wanted}
