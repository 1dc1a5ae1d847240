"""Null references: what each diagnostic reads for exactly Gaussian data of the same shape.

A measured CV, AD Avg or pass rate means little without the value a Gaussian would give at the
same N and d: for independent Gaussian coordinates about 95% of coordinates pass each test and
mean A² ≈ 0.39, and the thin-shell CV of N(μ, Σ) depends on Σ alone (≈ 1/√(2d) for N(0, I_d)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.stats.column_tests import column_tests
from pipeline.stats.thin_shell import thin_shell_cv


@dataclass(frozen=True)
class NullReference:
    """Diagnostics of Gaussian data shaped like the embeddings (means over ``draws`` samples)."""

    cv: float
    ad_mean: float
    ad_pass_frac: float
    dp_p_mean: float
    dp_pass_frac: float
    draws: int


def gaussian_null(z: np.ndarray, rng: np.random.Generator, draws: int = 4) -> NullReference:
    """Draw ``draws`` samples of N rows from N(mean(z), cov(z)) and compute every diagnostic.

    z: ``(N, d)``. The CV reference keeps the embeddings' mean and covariance (so it is the
    thin-shell CV a Gaussian with their second moments would show); the normality references
    are invariant to them.
    """
    arr = np.asarray(z, dtype=np.float64)
    n, d = arr.shape
    if n < 8 or d < 1:
        raise ValueError(f"z.shape = {arr.shape}: need at least 8 rows and 1 column")
    if draws < 1:
        raise ValueError(f"draws = {draws}: must be >= 1")
    mean, cov = arr.mean(axis=0), np.atleast_2d(np.cov(arr, rowvar=False))
    values = []
    for _ in range(draws):
        sample = rng.multivariate_normal(mean, cov, size=n, method="eigh")
        tests = column_tests(sample)
        values.append((thin_shell_cv(sample), float(np.mean(tests.ad)),
                       float(np.mean(tests.ad_pass)), float(np.mean(tests.dp_p)),
                       float(np.mean(tests.dp_pass))))
    cv, ad, ad_pass, dp_p, dp_pass = (float(v) for v in np.mean(values, axis=0))
    return NullReference(cv, ad, ad_pass, dp_p, dp_pass, draws)
