"""Thin-shell coefficient of variation of embedding norms (SPEC §2)."""

from __future__ import annotations

import numpy as np


def thin_shell_cv(z: np.ndarray) -> float:
    """std_i ‖z_i‖ / mean_i ‖z_i‖ with ddof = 0 for (N, d) embeddings z; lower = thinner shell.

    Norms are computed in float64. Reference: Betser et al. 2026 (arXiv 2602.24012), thin-shell
    concentration of contrastive embeddings.
    """
    arr = np.asarray(z, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"z.shape = {arr.shape}: expected a non-empty 2-D (N, d) array")
    norms = np.linalg.norm(arr, axis=1)
    return float(norms.std() / norms.mean())
