"""Anderson-Darling normality statistic per column, mean and std estimated (SPEC §2).

A² = −N − (1/N) Σ_i (2i−1)·(log Φ(w_(i)) + log(1 − Φ(w_(N+1−i)))), w = (x − x̄)/s, s with
ddof = 1; identical to ``scipy.stats.anderson(col, 'norm').statistic`` (Stephens 1974).
"""

from __future__ import annotations

import numpy as np
import torch

from pipeline.stats._columns import centre_and_moments, iter_blocks, sample_rows

# Stephens' 5% critical value for the normal case with both parameters estimated.
AD_CRIT_5PCT = 0.752


# Past this argument erfc nears the subnormal range; such elements use log_ndtr instead.
_ERFC_MAX_ARG = 25.0
_LOG2 = float(np.log(2.0))


def _log_erfc_(a: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = log erfc(a) elementwise for a (b, N) float64 tensor a with monotone rows.

    erfc(a) = 2Φ(−√2·a) is relatively accurate in its small tail and ≥ 1 on the other side,
    so log erfc is accurate in absolute terms everywhere, which is what the A² sum needs.
    Arguments beyond 25 (found at the ends of the monotone rows) go through log_ndtr's asymptotic
    series instead, since erfc underflows near 26.5.
    """
    torch.special.erfc(a, out=out).log_()
    if bool((a[:, 0] > _ERFC_MAX_ARG).any() or (a[:, -1] > _ERFC_MAX_ARG).any()):
        far = a > _ERFC_MAX_ARG
        out[far] = torch.special.log_ndtr(a[far] * -(2**0.5)) + _LOG2
    return out


def a2_from_centred_sorted(d: torch.Tensor, m2: np.ndarray, scratch: torch.Tensor) -> np.ndarray:
    """A² for each row of a sorted, mean-centred (b, N) float64 block; overwrites `d`.

    scratch: (b, N) float64 work space. The reversed term is re-indexed, j = N + 1 − i:
    S = Σ_j (2j − 1)·log Φ(w_j) + (2N + 1 − 2j)·log Φ(−w_j), so no reversed copy is made,
    and log Φ(±w) = log erfc(∓w/√2) − log 2 (one erfc and one log per term; log_ndtr is
    several times slower on CPU). A² = −N − S/N.
    """
    n = d.shape[1]
    if n < 2:
        return np.full(d.shape[0], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = torch.from_numpy(1.0 / np.sqrt(2.0 * m2 * n / (n - 1)))
    u = d.mul_(inv.unsqueeze(1))  # w/√2; zero std gives inf/NaN, hence NaN A², as in scipy
    up = torch.arange(1, 2 * n, 2, dtype=torch.float64)  # 2j − 1, j = 1..N
    total = _log_erfc_(u.neg_(), scratch) @ up  # log erfc(−w/√2) = log Φ(w) + log 2
    total += _log_erfc_(u.neg_(), scratch) @ torch.flip(up, dims=(0,))
    # Σ_j (up_j + down_j)·log 2 = 2N²·log 2
    return (-n - total / n + 2 * n * _LOG2).numpy()


def anderson_darling(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Raw A² of each 1-D slice of `x` along `axis` against a fitted normal.

    Args:
        x: array, e.g. (N, d) embeddings; any real dtype (float32 is sorted in float32, then
            promoted to float64 for the statistic).
        axis: the sample axis.

    Returns:
        float64 array of x's shape without `axis` (shape (d,) for (N, d), axis=0). NaN for a
        slice with zero variance or with NaN values; NaN everywhere when N < 2.

    Reference: Stephens (1974), JASA 69:730; equals ``scipy.stats.anderson(col, 'norm')``.
    """
    rows, out_shape = sample_rows(x, axis)
    out = np.empty(rows.shape[0], dtype=np.float64)
    for sl, t, scratch in iter_blocks(rows, sort=True):
        mom = centre_and_moments(t, scratch)
        out[sl] = a2_from_centred_sorted(t, mom.m2, scratch[1])
    return out.reshape(out_shape)


def ad_critical_5pct(n: int) -> float:
    """5% critical value of A² for sample size n: 0.752 / (1 + 0.75/n + 2.25/n²).

    Rounded to 3 decimals exactly as ``scipy.stats.anderson`` does, so the pass rule matches
    scipy's ``statistic < critical_values[2]``.
    """
    if n < 1:
        raise ValueError(f"n = {n}: sample size must be >= 1")
    return float(np.round(AD_CRIT_5PCT / (1.0 + 0.75 / n + 2.25 / n**2), 3))


def ad_pass(a2: np.ndarray, n: int) -> np.ndarray:
    """Boolean array, True where A² < ad_critical_5pct(n) (NaN never passes)."""
    return np.asarray(a2) < ad_critical_5pct(n)
