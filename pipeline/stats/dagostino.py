"""D'Agostino-Pearson K² omnibus normality test per column (SPEC §2).

K² = Z_skew² + Z_kurt², p = P(χ²₂ > K²); identical to ``scipy.stats.normaltest`` (SciPy 1.17),
including its quirks: skewness exactly 0 is replaced by 1 in the skew transform, and N ≤ 7
gives NaN with a warning. References: D'Agostino (1970) Biometrika 58:341 (skewness);
Anscombe & Glynn (1983) Biometrika 70:227 (kurtosis); D'Agostino & Pearson (1973).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special

from pipeline.stats._columns import (
    RowMoments,
    centre_and_moments,
    iter_blocks,
    sample_rows,
)

# scipy.stats.normaltest returns NaN (with a SmallSampleWarning) below this many samples.
DP_MIN_SAMPLES = 8


def _standardised_moments(mom: RowMoments) -> tuple[np.ndarray, np.ndarray]:
    """Sample skewness m3/m2^1.5 and kurtosis m4/m2² (NaN where the variance is ~0, as scipy)."""
    eps = np.finfo(np.float64).eps
    zero = mom.m2 <= (eps * mom.mean) ** 2
    with np.errstate(all="ignore"):
        skew = np.where(zero, np.nan, mom.m3 / mom.m2**1.5)
        kurt = np.where(zero, np.nan, mom.m4 / mom.m2**2)
    return skew, kurt


def _z_skew(b2: np.ndarray, n: float) -> np.ndarray:
    """D'Agostino's normal approximation of the sample skewness (scipy.stats.skewtest)."""
    y = b2 * np.sqrt(((n + 1) * (n + 3)) / (6.0 * (n - 2)))
    beta2 = (
        3.0 * (n**2 + 27 * n - 70) * (n + 1) * (n + 3) / ((n - 2.0) * (n + 5) * (n + 7) * (n + 9))
    )
    w2 = -1 + np.sqrt(2 * (beta2 - 1))
    delta = 1 / np.sqrt(0.5 * np.log(w2))
    alpha = np.sqrt(2.0 / (w2 - 1))
    y = np.where(y == 0, 1.0, y)  # scipy's behaviour, kept for exact agreement
    z: np.ndarray = delta * np.log(y / alpha + np.sqrt((y / alpha) ** 2 + 1))
    return z


def _z_kurt(b2: np.ndarray, n: float) -> np.ndarray:
    """Anscombe-Glynn normal approximation of the sample kurtosis (scipy.stats.kurtosistest)."""
    e = 3.0 * (n - 1) / (n + 1)
    varb2 = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) * (n + 1.0) * (n + 3) * (n + 5))
    x = (b2 - e) / varb2**0.5
    sqrtbeta1 = (
        6.0
        * (n * n - 5 * n + 2)
        / ((n + 7) * (n + 9))
        * ((6.0 * (n + 3) * (n + 5)) / (n * (n - 2) * (n - 3))) ** 0.5
    )
    a = 6.0 + 8.0 / sqrtbeta1 * (2.0 / sqrtbeta1 + (1 + 4.0 / (sqrtbeta1**2)) ** 0.5)
    term1 = 1 - 2 / (9.0 * a)
    denom = 1 + x * (2 / (a - 4.0)) ** 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        term2 = np.sign(denom) * np.where(
            denom == 0.0, np.nan, ((1 - 2.0 / a) / np.abs(denom)) ** (1 / 3)
        )
    z: np.ndarray = (term1 - term2) / (2 / (9.0 * a)) ** 0.5
    return z


def k2_from_moments(mom: RowMoments) -> tuple[np.ndarray, np.ndarray]:
    """(K², p) from per-row moments; NaN with a RuntimeWarning when N < 8."""
    if mom.n < DP_MIN_SAMPLES:
        warnings.warn(
            f"D'Agostino-Pearson needs at least {DP_MIN_SAMPLES} samples, got N = {mom.n}; "
            "returning NaN (as scipy.stats.normaltest)",
            RuntimeWarning,
            stacklevel=3,
        )
        nan = np.full(mom.mean.shape, np.nan)
        return nan, nan.copy()
    skew, kurt = _standardised_moments(mom)
    with np.errstate(invalid="ignore"):
        k2 = _z_skew(skew, float(mom.n)) ** 2 + _z_kurt(kurt, float(mom.n)) ** 2
    return k2, special.chdtrc(2, k2)


def dagostino_pearson(x: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """D'Agostino-Pearson K² and its p-value for each 1-D slice of `x` along `axis`.

    Args:
        x: array, e.g. (N, d) embeddings; moments are computed in float64.
        axis: the sample axis.

    Returns:
        (statistic, pvalue), float64 arrays of x's shape without `axis`; equal to
        ``scipy.stats.normaltest(x, axis=axis)``. N ≤ 7: all NaN and a RuntimeWarning.
    """
    rows, out_shape = sample_rows(x, axis)
    stat = np.empty(rows.shape[0], dtype=np.float64)
    pval = np.empty(rows.shape[0], dtype=np.float64)
    for sl, t, scratch in iter_blocks(rows, sort=False):
        mom = centre_and_moments(t, scratch)
        stat[sl], pval[sl] = k2_from_moments(mom)
    return stat.reshape(out_shape), pval.reshape(out_shape)
