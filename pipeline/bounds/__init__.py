"""Generalisation bounds (SPEC.md §4): Theorem 1's terms, the encoder constants dΘ, R, B_τ, C_Φ,
and (re-exported from pipeline.search) the finite-k window and 1/k slope fits of §3.
Imports only numpy, scipy and torch."""

from pipeline.bounds.constants import (
    CAVEATS,
    b_tau,
    lipschitz_linear,
    lipschitz_mlp,
    parameter_count,
    parameter_distance,
)
from pipeline.bounds.theorem1 import (
    BoundTerms,
    complexity_factor,
    gaussian_channel_e_r2,
    theorem1,
)
from pipeline.search.finite_k import SlopeFit, fit_loglog_slope, prop1_window

__all__ = [
    "CAVEATS",
    "BoundTerms",
    "SlopeFit",
    "b_tau",
    "complexity_factor",
    "fit_loglog_slope",
    "gaussian_channel_e_r2",
    "lipschitz_linear",
    "lipschitz_mlp",
    "parameter_count",
    "parameter_distance",
    "prop1_window",
    "theorem1",
]
