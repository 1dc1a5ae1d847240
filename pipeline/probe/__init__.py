"""Frozen-feature evaluation protocols (SPEC.md §5): linear probe and weighted kNN.

Pure functions of feature arrays (numpy or torch, CPU or CUDA); they import only numpy, scipy
and torch. Accuracies come with Wilson intervals (``pipeline.stats.intervals.wilson_interval``).
"""

from pipeline.probe.knn import KnnResult, knn_predict, weighted_knn
from pipeline.probe.linear import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    LinearProbeResult,
    LogisticFit,
    fit_logistic,
    linear_probe,
    predict,
    standardize,
    validation_split,
)

__all__ = [
    "DEFAULT_MAX_ITER",
    "DEFAULT_TOL",
    "KnnResult",
    "LinearProbeResult",
    "LogisticFit",
    "fit_logistic",
    "knn_predict",
    "linear_probe",
    "predict",
    "standardize",
    "validation_split",
    "weighted_knn",
]
