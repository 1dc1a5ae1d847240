"""One row of the statistics table: every SPEC §2 quantity for one cell and representation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.stats.checks import check_embeddings
from pipeline.stats.column_tests import ColumnTests, column_tests
from pipeline.stats.geometry import alignment, effective_rank, negative_cosines, uniformity
from pipeline.stats.thin_shell import thin_shell_cv

REPRESENTATIONS = ("raw", "normalized")
_NAN = float("nan")


@dataclass(frozen=True)
class CellSummary:
    """Aggregates of one cell's held-out embeddings (Betser et al. 2026, Table 1 columns).

    status is 'ok' or 'failed' (reason says why; every float is NaN then). ad_* and dp_* average
    the per-coordinate tests; *_pass_frac are fractions in [0, 1]. align is NaN without z_pos.
    """

    status: str
    reason: str
    n: int
    d: int
    cv: float = _NAN
    ad_mean: float = _NAN
    ad_pass_frac: float = _NAN
    dp_stat_mean: float = _NAN
    dp_p_mean: float = _NAN
    dp_pass_frac: float = _NAN
    align: float = _NAN
    uniform: float = _NAN
    eff_rank: float = _NAN
    neg_cos_mean: float = _NAN
    neg_cos_std: float = _NAN


def _shape(z: np.ndarray) -> tuple[int, int]:
    shape = np.shape(z)
    return (int(shape[0]) if len(shape) > 0 else 0, int(shape[1]) if len(shape) > 1 else 0)


def _failed(z: np.ndarray, reason: str) -> CellSummary:
    n, d = _shape(z)
    return CellSummary(status="failed", reason=reason, n=n, d=d)


def _representation(z: np.ndarray, representation: str) -> tuple[np.ndarray, str]:
    """float64 copy of z in the requested representation, or '' and a reason."""
    arr = np.asarray(z, dtype=np.float64)
    if representation == "raw":
        return arr, ""
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    zero = int(np.sum(norms == 0))
    if zero:
        return arr, f"{zero} row(s) with zero L2 norm cannot be normalised"
    normed = arr / norms
    return normed, check_embeddings(normed)


def _check_pos(z: np.ndarray, z_pos: np.ndarray) -> str:
    if np.shape(z_pos) != np.shape(z):
        return f"z_pos.shape = {np.shape(z_pos)} differs from z.shape = {np.shape(z)}"
    if not np.all(np.isfinite(z_pos)):
        return f"z_pos contains {int(np.sum(~np.isfinite(z_pos)))} NaN or infinite value(s)"
    return ""


def summarize(
    z: np.ndarray,
    z_pos: np.ndarray | None = None,
    tests: ColumnTests | None = None,
    representation: str = "raw",
) -> CellSummary:
    """All SPEC §2 statistics of (N, d) embeddings z, or a failed summary with the reason.

    z_pos: (N, d) positive views for alignment (align is NaN when None). tests: per-column
    results already computed on this representation (e.g. concatenated Dask column blocks);
    computed here when None. representation: 'raw', or 'normalized' (rows divided by their L2
    norm before the tests, CV and effective rank). Bad data never raises: the returned summary
    has status 'failed'. Bad arguments (representation, tests of the wrong length) do raise.
    """
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation = {representation!r}: must be one of {REPRESENTATIONS}")
    reason = check_embeddings(z) or (_check_pos(z, z_pos) if z_pos is not None else "")
    if reason:
        return _failed(z, reason)
    r, reason = _representation(z, representation)
    if reason:
        return _failed(z, f"{representation}: {reason}")
    n, d = r.shape
    if tests is None:
        tests = column_tests(r)
    elif tests.ad.shape != (d,):
        raise ValueError(f"tests.ad.shape = {tests.ad.shape}: expected ({d},), one per coordinate")
    try:
        rank = effective_rank(r)
    except np.linalg.LinAlgError as err:
        return _failed(z, f"effective rank: SVD did not converge ({err})")
    neg_mean, neg_std = negative_cosines(r, z_pos)
    return CellSummary(
        status="ok",
        reason="",
        n=n,
        d=d,
        cv=thin_shell_cv(r),
        ad_mean=float(np.mean(tests.ad)),
        ad_pass_frac=float(np.mean(tests.ad_pass)),
        dp_stat_mean=float(np.mean(tests.dp_stat)),
        dp_p_mean=float(np.mean(tests.dp_p)),
        dp_pass_frac=float(np.mean(tests.dp_pass)),
        align=alignment(r, z_pos) if z_pos is not None else _NAN,
        uniform=uniformity(r),
        eff_rank=rank,
        neg_cos_mean=neg_mean,
        neg_cos_std=neg_std,
    )
