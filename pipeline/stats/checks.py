"""Input checks that turn bad embeddings into a readable reason instead of an exception."""

from __future__ import annotations

import numpy as np

_MAX_LISTED = 10


def _list_indices(idx: np.ndarray) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:_MAX_LISTED])
    return shown + (f", ... ({idx.size} in all)" if idx.size > _MAX_LISTED else "")


def check_embeddings(z: np.ndarray, min_rows: int = 8) -> str:
    """'' when (N, d) embeddings z can be summarised, else the reasons joined by '; '.

    Reasons: not a non-empty 2-D numeric array; fewer than min_rows rows; NaN or infinite
    values (with counts); constant coordinates (zero range over the rows, with indices).
    min_rows = 8 is the smallest N for which D'Agostino-Pearson is defined.
    """
    if min_rows < 1:
        raise ValueError(f"min_rows = {min_rows}: must be >= 1")
    arr = np.asarray(z)
    if arr.ndim != 2 or arr.dtype.kind not in "biuf" or arr.shape[1] == 0:
        return (
            f"expected a 2-D (N, d) real array with d >= 1, got shape {arr.shape} dtype {arr.dtype}"
        )
    reasons = []
    n = arr.shape[0]
    if n < min_rows:
        reasons.append(f"only {n} row(s); at least min_rows = {min_rows} are needed")
    if arr.dtype.kind == "f":
        n_nan = int(np.isnan(arr).sum())
        n_inf = int(np.isinf(arr).sum())
        if n_nan or n_inf:
            reasons.append(f"contains {n_nan} NaN and {n_inf} infinite value(s) out of {arr.size}")
    if n >= 2:
        const = np.flatnonzero(np.max(arr, axis=0) == np.min(arr, axis=0))
        if const.size:
            reasons.append(
                f"{const.size} constant coordinate(s) (zero variance) at index "
                f"{_list_indices(const)}"
            )
    return "; ".join(reasons)
