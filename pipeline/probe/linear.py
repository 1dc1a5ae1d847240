"""Linear probe on frozen features (SPEC.md §5; Radford et al. 2021, CLIP §3.2 and App. A.3).

Protocol of :func:`linear_probe`:

1. Standardise the features with the training split's own mean and std (ddof = 0); a constant
   column (std 0) is centred and left unscaled. The validation rows below
   are standardised with the same whole-training-split statistics (as scikit-learn's
   ``StandardScaler`` fitted once on the training split would do).
2. Split the training rows into a fitting part and a validation part: per class c, a seeded
   shuffle sends round(val_fraction · n_c) rows, clipped to [1, n_c − 1], to validation; a class
   with a single row keeps it in the fitting part (so every class is always fitted).
3. For each C of the grid, in increasing order, minimise the multinomial logistic objective

       (1/n) Σ_i −log softmax(W f_i + b)_{y_i} + (1/(2Cn)) ‖W‖²_F

   (scikit-learn's convention, C the inverse strength; intercept b unpenalised) by L-BFGS,
   warm-started from the previous C's solution; score accuracy on the validation part.
4. The chosen C has the best validation accuracy; ties go to the smaller C (the stronger
   regularisation). Refit on the whole training split with it (warm-started from its fit on the
   fitting part) and score top-1 accuracy on the held-out split, with a Wilson interval.

Numerics: the features (the n × d matmuls) are in ``dtype`` (float32 by default, float64 for
tight comparisons) on ``device``; the parameters, the L-BFGS state and the loss sum are
float64 (the gradient's matmul runs in ``dtype``, its result is float64). Stopping:
max |∂objective| <= ``tol`` (scikit-learn's ``tol``, which scipy's L-BFGS-B applies the same
way as ``gtol``), or ``max_iter`` iterations (CLIP's 1000), or a change of the loss or of the
step below 1e-12 for float32 features (64·eps for float64: scipy's ftol), where float loss
differences stop meaning anything. Predicted class: the argmax of the logits, ties to the
smallest class id.

Resolution of the sweep: C's penalty contributes W/(Cn) to the gradient. Once that is below
``tol`` (C·n >~ ‖W‖/tol: with n = 40 000 and tol = 1e-4, C >~ 1), a fit warm-started from the
previous C already meets the tolerance and stops at once, so the larger C's of the grid score
alike and the tie rule picks the smallest of them. Tighten ``tol`` (and use float64) to resolve
them; on held-out accuracy this rarely matters, since those fits are all near the unpenalised
optimum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pipeline.probe import checks
from pipeline.stats.intervals import wilson_interval
from pipeline.stats.uncertainty import ConfidenceInterval, check_level

DEFAULT_TOL = 1e-4  # scikit-learn's default tol of LogisticRegression
DEFAULT_MAX_ITER = 1000  # CLIP's linear-probe setting
HISTORY_SIZE = 10  # L-BFGS memory: scipy's L-BFGS-B default (maxcor)


@dataclass(frozen=True)
class LogisticFit:
    """A fitted multinomial logistic regression on standardised features.

    coef ``(K, d)`` and intercept ``(K,)`` float64 on the CPU; both sum to 0 over the classes
    when the fit started from zeros or from another such fit (every gradient does).
    """

    coef: np.ndarray
    intercept: np.ndarray
    c: float
    loss: float  # the objective at the solution
    grad_max: float  # max |gradient| there
    n_iter: int
    converged: bool  # grad_max <= tol


@dataclass(frozen=True)
class LinearProbeResult:
    """Linear-probe outcome: held-out top-1 accuracy, its interval, the sweep."""

    accuracy: float
    ci: ConfidenceInterval  # Wilson interval of the accuracy at ``ci.level``
    c: float  # the chosen C
    c_grid: tuple[float, ...]  # swept, increasing
    val_accuracy: tuple[float, ...]  # per C of c_grid, on the validation part
    n_train: int  # training rows (fitting part + validation part)
    n_val: int
    n_test: int
    n_classes: int
    n_iter: int  # L-BFGS iterations of the final refit
    converged: bool  # whether the final refit reached tol


def standardize(train: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    """``(train, *others)`` centred and scaled by train's column mean and std (ddof = 0).

    Arithmetic in train's dtype, corrected two-pass: shift by a first mean m (x − m is exact by
    Sterbenz's lemma wherever x lies within a factor 2 of m), then the mean and the variance of
    the shifted values. Constant columns (max = min) are centred exactly to 0 and not scaled.
    """
    n = train.shape[0]
    constant = train.amax(dim=0) == train.amin(dim=0)
    shift = torch.where(constant, train[0], train.sum(dim=0) / n)
    out = train - shift
    correction = out.sum(dim=0) / n
    var = (out.pow(2).sum(dim=0) / n - correction.pow(2)).clamp_(min=0.0)
    scale = torch.where(constant | (var == 0), torch.ones_like(var), var.sqrt())
    return (out.sub_(correction).div_(scale),
            *((x - shift).sub_(correction).div_(scale) for x in others))


def validation_split(labels: np.ndarray, val_fraction: float,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows), each sorted: a seeded split stratified by class.

    labels: ``(n,)`` ints. From class c (n_c rows), round(val_fraction · n_c) rows chosen by
    ``rng.permutation``, clipped to [1, n_c − 1], go to validation; a class of one row keeps it.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng = {rng!r}: expected a numpy.random.Generator")
    val: list[np.ndarray] = []
    for c in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == c))
        if rows.size >= 2:
            m = min(max(int(np.floor(val_fraction * rows.size + 0.5)), 1), rows.size - 1)
            val.append(rows[:m])
    val_rows = np.sort(np.concatenate(val)) if val else np.zeros(0, dtype=np.int64)
    if val_rows.size == 0:
        raise ValueError(f"val_fraction = {val_fraction}: the validation split is empty (every "
                         f"class of train_y has a single row, n = {labels.size}); the probe "
                         "needs a class with >= 2 training rows to choose C")
    fit_rows = np.setdiff1d(np.arange(labels.size), val_rows)
    return fit_rows, val_rows


def _objective(x: Tensor, flat_target: Tensor, theta: Tensor,
               lam: float) -> tuple[Tensor, Tensor]:
    """Objective and its gradient at ``theta = [W | b]`` ``(K, d + 1)`` float64.

    ``flat_target`` = arange(n) · K + y indexes each row's target in the flattened ``(n, K)``
    logits. The softmax is written out (max, exp, sum) in place of ``torch.logsumexp``, which
    is several times slower on K = 10 columns; the two n × d matmuls dominate the rest.
    """
    n, d = x.shape
    w = theta[:, :d]
    z = torch.addmm(theta[:, d].to(x.dtype), x, w.to(x.dtype).T)  # (n, K) logits
    z.sub_(z.amax(dim=1, keepdim=True))  # z − max_k z: exp below cannot overflow
    picked = z.view(-1)[flat_target]
    p = z.exp_()
    total = p.sum(dim=1, keepdim=True)
    loss = ((total.squeeze(1).log() - picked).sum(dtype=torch.float64) / n
            + 0.5 * lam * (w * w).sum())
    p.div_(total)  # softmax, in place of the logits
    p.view(-1)[flat_target] -= 1.0
    grad = torch.empty_like(theta)
    grad[:, :d] = (p.T @ x).double().div_(n).add_(w, alpha=lam)
    grad[:, d] = p.sum(dim=0).double().div_(n)
    return loss, grad


def fit_logistic(x: Tensor, y: Tensor, n_classes: int, c: float, *,
                 tol: float = DEFAULT_TOL, max_iter: int = DEFAULT_MAX_ITER,
                 init: LogisticFit | None = None) -> LogisticFit:
    """Minimise (1/n) Σ −log softmax(W x_i + b)_{y_i} + ‖W‖²_F / (2Cn) by L-BFGS.

    x: ``(n, d)`` float32/float64 features (already standardised), y: ``(n,)`` int64 ids in
    0..n_classes − 1 on x's device. ``init``: a warm start (else zeros).
    """
    n, d = x.shape
    if y.shape != (n,) or int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(f"y: shape {tuple(y.shape)}, values {int(y.min())}..{int(y.max())}: "
                         f"expected ({n},) class ids in 0..n_classes − 1 = {n_classes - 1}")
    theta = torch.zeros(n_classes, d + 1, dtype=torch.float64, device=x.device)
    if init is not None:
        theta[:, :d] = torch.from_numpy(init.coef).to(x.device)
        theta[:, d] = torch.from_numpy(init.intercept).to(x.device)
    lam = 1.0 / (c * n)
    tolerance_change = 1e-12 if x.dtype == torch.float32 else 64 * float(np.finfo(float).eps)
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=max_iter, max_eval=4 * max_iter,
                            tolerance_grad=tol, tolerance_change=tolerance_change,
                            history_size=HISTORY_SIZE, line_search_fn="strong_wolfe")

    flat_target = torch.arange(n, device=x.device) * n_classes + y

    last: list[Tensor] = []  # the latest evaluation: point, loss, gradient

    def closure() -> Tensor:
        loss, grad = _objective(x, flat_target, theta, lam)
        theta.grad = grad
        last[:] = [theta.clone(), loss, grad]
        return loss

    with torch.no_grad():
        opt.step(closure)  # type: ignore[no-untyped-call]  # torch: LBFGS.step is unannotated
        if torch.equal(last[0], theta):  # the line search ended on its last evaluation
            loss, grad = last[1], last[2]
        else:
            loss, grad = _objective(x, flat_target, theta, lam)
    grad_max = float(grad.abs().max())
    coef, intercept = theta[:, :d].cpu().numpy().copy(), theta[:, d].cpu().numpy().copy()
    return LogisticFit(coef=coef, intercept=intercept, c=float(c), loss=float(loss),
                       grad_max=grad_max,
                       n_iter=int(opt.state[theta].get("n_iter", 0)), converged=grad_max <= tol)


def predict(fit: LogisticFit, x: Tensor) -> Tensor:
    """Class ids ``(n,)`` (0..K−1): argmax of the logits, ties to the smallest id."""
    w = torch.from_numpy(fit.coef).to(device=x.device, dtype=x.dtype)
    b = torch.from_numpy(fit.intercept).to(device=x.device, dtype=x.dtype)
    return torch.addmm(b, x, w.T).argmax(dim=1)


def _c_grid(c_grid: Sequence[float]) -> tuple[float, ...]:
    values = list(c_grid) if isinstance(c_grid, Sequence | np.ndarray) else None
    if not values:
        raise ValueError(f"c_grid = {c_grid!r}: need a non-empty list of inverse L2 strengths "
                         "C > 0 (e.g. a log grid 1e-3 ... 1e3)")
    for i, c in enumerate(values):
        checks.positive_float(c, f"c_grid[{i}]")
    if len(set(values)) != len(values):
        raise ValueError(f"c_grid = {values}: values must be distinct")
    return tuple(sorted(float(c) for c in values))


def linear_probe(train_x: Any, train_y: Any, test_x: Any, test_y: Any,
                 c_grid: Sequence[float], val_fraction: float, rng: np.random.Generator, *,
                 level: float = 0.95, tol: float = DEFAULT_TOL,
                 max_iter: int = DEFAULT_MAX_ITER, dtype: torch.dtype = torch.float32,
                 device: str | torch.device | None = None) -> LinearProbeResult:
    """Linear-probe top-1 accuracy of frozen features (the protocol in the module docstring).

    train_x ``(n_train, d)``, test_x ``(n_test, d)``: numpy arrays or torch tensors (raw
    features, standardised here); train_y ``(n_train,)``, test_y ``(n_test,)``: integer class
    ids, any values (mapped to 0..K−1 in sorted order); every test class must occur in train_y.
    rng draws the validation split. device: where the fits run (default: train_x's device if a
    tensor, else the CPU).
    """
    grid = _c_grid(c_grid)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, int | float) \
            or not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction = {val_fraction!r}: must be in (0, 1), the share of the "
                         "training split held out to choose C")
    check_level(level)
    checks.positive_float(tol, "tol")
    checks.positive_int(max_iter, "max_iter")
    dev, xtr, xte, classes, ytr_np, yte_np = checks.probe_inputs(train_x, train_y, test_x,
                                                                 test_y, device, dtype)
    fit_rows, val_rows = validation_split(ytr_np, float(val_fraction), rng)
    xtr, xte = standardize(xtr, xte)
    ytr = torch.from_numpy(ytr_np).to(dev)
    k = int(classes.size)
    fit_idx, val_idx = (torch.from_numpy(r).to(dev) for r in (fit_rows, val_rows))
    x_fit, y_fit, x_val, y_val = xtr[fit_idx], ytr[fit_idx], xtr[val_idx], ytr[val_idx]
    fits: list[LogisticFit] = []
    val_acc: list[float] = []
    for c in grid:
        fits.append(fit_logistic(x_fit, y_fit, k, c, tol=tol, max_iter=max_iter,
                                 init=fits[-1] if fits else None))
        val_acc.append(int((predict(fits[-1], x_val) == y_val).sum()) / val_rows.size)
    del x_fit, x_val
    best = int(np.argmax(val_acc))  # first maximum: ties to the smaller C
    final = fit_logistic(xtr, ytr, k, grid[best], tol=tol, max_iter=max_iter, init=fits[best])
    correct = int((predict(final, xte) == torch.from_numpy(yte_np).to(dev)).sum())
    ci = wilson_interval(correct, xte.shape[0], level)
    return LinearProbeResult(accuracy=correct / xte.shape[0], ci=ci, c=grid[best], c_grid=grid,
                             val_accuracy=tuple(val_acc), n_train=xtr.shape[0],
                             n_val=int(val_rows.size), n_test=xte.shape[0], n_classes=k,
                             n_iter=final.n_iter, converged=final.converged)
