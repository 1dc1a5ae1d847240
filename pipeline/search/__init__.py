"""Similarity search on held-out embeddings (SPEC.md §3): retrieval, softmax search kernels,
similarity-search cross-entropies, the population risk and the finite-k (O(1/k)) law.
Imports only numpy, scipy and torch."""

from pipeline.search.crn import RESOLVED_Z, CRNSweep, crn_gap_sweep, nested_negatives
from pipeline.search.cross_entropy import (
    RiskEstimate,
    SearchCE,
    population_cross_entropy,
    population_risk,
    similarity_search_cross_entropy,
)
from pipeline.search.finite_k import (
    CRNRow,
    GapRow,
    SlopeFit,
    ce_minus_risk_table,
    crn_table,
    fit_loglog_slope,
    k_sweep,
    prop1_window,
)
from pipeline.search.kernels import (
    idealised_search_kernel,
    log_softmax_search_kernel,
    softmax_search_kernel,
)
from pipeline.search.retrieval import (
    heldout_infonce_risk,
    loo_majority_knn_accuracy,
    positive_ranks,
    recall_at_k,
    recalls,
    selection_split,
    split_recall,
)

__all__ = [
    "RESOLVED_Z",
    "CRNRow",
    "CRNSweep",
    "GapRow",
    "RiskEstimate",
    "SearchCE",
    "SlopeFit",
    "ce_minus_risk_table",
    "crn_gap_sweep",
    "crn_table",
    "fit_loglog_slope",
    "heldout_infonce_risk",
    "idealised_search_kernel",
    "k_sweep",
    "log_softmax_search_kernel",
    "loo_majority_knn_accuracy",
    "nested_negatives",
    "population_cross_entropy",
    "population_risk",
    "positive_ranks",
    "prop1_window",
    "recall_at_k",
    "recalls",
    "selection_split",
    "similarity_search_cross_entropy",
    "softmax_search_kernel",
    "split_recall",
]
