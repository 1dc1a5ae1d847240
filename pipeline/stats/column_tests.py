"""Both normality tests on a block of columns in one pass: the unit of one Dask task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.stats._columns import centre_and_moments, iter_blocks, sample_rows
from pipeline.stats.anderson import a2_from_centred_sorted, ad_pass
from pipeline.stats.dagostino import k2_from_moments

DP_ALPHA = 0.05


@dataclass(frozen=True)
class ColumnTests:
    """Per-column normality results for b columns; every field has shape (b,).

    ad: A² (float64); ad_pass: A² < 5% critical value; dp_stat: K²; dp_p: its p-value.
    A column passes D'Agostino-Pearson when dp_p > 0.05.
    """

    ad: np.ndarray
    ad_pass: np.ndarray
    dp_stat: np.ndarray
    dp_p: np.ndarray

    @property
    def dp_pass(self) -> np.ndarray:
        """True where the D'Agostino-Pearson p-value exceeds 0.05 (NaN never passes)."""
        return self.dp_p > DP_ALPHA


def column_tests(block: np.ndarray) -> ColumnTests:
    """Anderson-Darling and D'Agostino-Pearson on each column of an (N, b) block.

    One sort and one moment pass per column serve both tests; float32 input is sorted in
    float32 and promoted to float64. Results equal ``scipy.stats.anderson(col, 'norm')`` and
    ``scipy.stats.normaltest(block, axis=0)``.
    """
    arr = np.asarray(block)
    if arr.ndim != 2:
        raise ValueError(f"block.shape = {arr.shape}: expected a 2-D (N, b) array of columns")
    rows, _ = sample_rows(arr, 0, name="block")
    m, n = rows.shape
    ad = np.empty(m)
    dp_stat = np.empty(m)
    dp_p = np.empty(m)
    for sl, t, scratch in iter_blocks(rows, sort=True):
        mom = centre_and_moments(t, scratch)
        dp_stat[sl], dp_p[sl] = k2_from_moments(mom)
        ad[sl] = a2_from_centred_sorted(t, mom.m2, scratch[1])
    return ColumnTests(ad=ad, ad_pass=ad_pass(ad, n), dp_stat=dp_stat, dp_p=dp_p)


def concat_column_tests(parts: Sequence[ColumnTests]) -> ColumnTests:
    """Concatenate per-block results in column order (the Dask stage's reduction)."""
    if len(parts) == 0:
        raise ValueError("parts = []: need at least one ColumnTests block to concatenate")
    return ColumnTests(
        ad=np.concatenate([p.ad for p in parts]),
        ad_pass=np.concatenate([p.ad_pass for p in parts]),
        dp_stat=np.concatenate([p.dp_stat for p in parts]),
        dp_p=np.concatenate([p.dp_p for p in parts]),
    )
