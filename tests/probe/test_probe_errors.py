"""Bad inputs of the frozen-feature protocols: each error names the parameter, the value and what
is allowed."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from pipeline.probe import fit_logistic, knn_predict, linear_probe, validation_split, weighted_knn

X, Y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2
XT, YT = np.random.default_rng(1).normal(size=(6, 3)), np.arange(6) % 2
RNG = np.random.default_rng(0)


def _probe(**kw):
    args = {"train_x": X, "train_y": Y, "test_x": XT, "test_y": YT, "c_grid": [0.1, 1.0],
            "val_fraction": 0.2, "rng": np.random.default_rng(0)} | kw
    return linear_probe(**args)


def _knn(**kw):
    args = {"bank": X, "bank_labels": Y, "queries": XT, "query_labels": YT, "k": [1, 5],
            "temperature": 0.07} | kw
    return weighted_knn(**args)


PROBE_CASES = [
    ({"c_grid": []}, "c_grid = []: need a non-empty list of inverse L2 strengths C > 0"),
    ({"c_grid": [1.0, -0.5]}, "c_grid[1] = -0.5: must be a finite number > 0"),
    ({"c_grid": [1.0, 1.0]}, "c_grid = [1.0, 1.0]: values must be distinct"),
    ({"val_fraction": 1.0}, "val_fraction = 1.0: must be in (0, 1), the share of the training "
                            "split held out to choose C"),
    ({"val_fraction": 0.0}, "val_fraction = 0.0: must be in (0, 1)"),
    ({"rng": 0}, "rng = 0: expected a numpy.random.Generator"),
    ({"level": 1.5}, "level = 1.5: confidence level must be in (0, 1)"),
    ({"tol": 0.0}, "tol = 0.0: must be a finite number > 0"),
    ({"max_iter": 0}, "max_iter = 0: must be an integer >= 1"),
    ({"dtype": torch.float16}, "dtype = torch.float16: allowed torch.float32 or torch.float64"),
    ({"device": "gpu7"}, "device = 'gpu7': not a torch device"),
    ({"train_x": X[:, 0]}, "train_x.shape = (20,): expected (n, d) features with n >= 1 rows "
                           "and d >= 1 columns"),
    ({"test_x": XT[:, :2]}, "test_x.shape = (6, 2): expected 3 columns, as many as train_x"),
    ({"train_x": np.where(np.eye(20, 3) > 0, np.nan, X)},
     "train_x has 3 NaN or infinite value(s) out of 60: features must be finite"),
    ({"train_x": np.array([["a"] * 3] * 20)}, "train_x.dtype = <U1: features must be real numbers"),
    ({"train_y": Y[:-1]}, "train_y.shape = (19,): expected (20,), one label per row of train_x"),
    ({"test_y": YT + 0.5}, "test_y.dtype = float64: labels must be integer class ids"),
    ({"test_y": np.array([0, 1, 7, 1, 9, 0])},
     "test_y has label(s) [7, 9] missing from train_y: every class must have samples in "
     "train_y, whose labels are [0, 1]"),
    ({"train_y": np.zeros(20, dtype=int), "test_y": np.zeros(6, dtype=int)},
     "train_y has 1 class ([0]): the probe needs at least 2 classes"),
]


@pytest.mark.parametrize(("kw", "message"), PROBE_CASES)
def test_linear_probe_errors(kw, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _probe(**kw)


def test_validation_split_without_any_class_of_two_rows():
    with pytest.raises(ValueError, match=re.escape(
            "val_fraction = 0.2: the validation split is empty (every class of train_y has a "
            "single row, n = 3); the probe needs a class with >= 2 training rows to choose C")):
        validation_split(np.array([0, 1, 2]), 0.2, RNG)


def test_fit_logistic_needs_ids_in_range():
    with pytest.raises(ValueError, match=re.escape(
            "y: shape (20,), values 0..2: expected (20,) class ids in 0..n_classes − 1 = 1")):
        fit_logistic(torch.from_numpy(X), torch.from_numpy(np.arange(20) % 3), 2, 1.0)


KNN_CASES = [
    ({"k": 21}, "k = 21: the number of neighbours must be an integer in 1..n_bank = 20 (the "
                "bank's rows)"),
    ({"k": [5, 0]}, "k[1] = 0: the number of neighbours must be an integer in 1..n_bank = 20"),
    ({"k": []}, "k = []: need an integer or a non-empty list of integers in 1..n_bank = 20"),
    ({"k": [5, 5]}, "k = [5, 5]: values must be distinct"),
    ({"k": 2.0}, "k = 2.0: need an integer or a non-empty list of integers"),
    ({"temperature": 0}, "temperature = 0: must be a finite number > 0"),
    ({"block": 0}, "block = 0: must be an integer >= 1"),
    ({"level": 0}, "level = 0: confidence level must be in (0, 1)"),
    ({"bank": X[None]}, "bank.shape = (1, 20, 3): expected (n, d) features"),
    ({"queries": XT[:, :1]}, "queries.shape = (6, 1): expected 3 columns, as many as bank"),
    ({"bank_labels": Y[:5]}, "bank_labels.shape = (5,): expected (20,), one label per row of "
                             "bank"),
    ({"query_labels": np.full(6, 3)}, "query_labels has label(s) [3] missing from bank_labels: "
                                      "every class must have samples in bank_labels, whose "
                                      "labels are [0, 1]"),
]


@pytest.mark.parametrize(("kw", "message"), KNN_CASES)
def test_weighted_knn_errors(kw, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _knn(**kw)


def test_knn_predict_checks_like_weighted_knn():
    with pytest.raises(ValueError, match=re.escape("k = 21: the number of neighbours")):
        knn_predict(X, Y, XT, 21, 0.07)
