"""The frozen-feature protocols of one encoder, for every representation it has (SPEC.md §5).

:func:`evaluate_encoder` embeds the training and held-out splits with a frozen encoder — its
output (``head``) and, for an encoder with a backbone and a head, the backbone's features
(``backbone``, what the field probes) — in one forward pass per batch, and runs the linear probe
and the weighted kNN on each. :func:`evaluate_inputs` runs them on the raw inputs (pixels or
input vectors, flattened): the baseline a learned representation should beat.

The probe is fitted on the whole training split of the dataset (not the cell's subsample of n
rows), so that cells of different n are scored alike, as SSL benchmarks score every encoder on
the same labelled training set. Pure torch/numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.encoders.encode import ENCODE_BATCH
from pipeline.encoders.features import embed_features, split_encoder
from pipeline.probe.knn import weighted_knn
from pipeline.probe.linear import linear_probe


@dataclass(frozen=True)
class ProbeSettings:
    """``probe:`` of params (see pipeline/config/sections.py ProbeConfig) and the level."""

    c_grid: Sequence[float]
    val_fraction: float
    knn_k: Sequence[int]
    knn_temperature: float
    level: float


def _scores(train: np.ndarray, y_train: np.ndarray, test: np.ndarray, y_test: np.ndarray,
            s: ProbeSettings, rng: np.random.Generator,
            device: torch.device | None) -> dict[str, Any]:
    """One row of scores: ``linear_probe`` (+ _lo, _hi, _c) and ``weighted_knn_<k>`` (+ _lo,
    _hi)."""
    probe = linear_probe(train, y_train, test, y_test, s.c_grid, s.val_fraction, rng,
                         level=s.level, device=device)
    row: dict[str, Any] = {"linear_probe": probe.accuracy, "linear_probe_lo": probe.ci.low,
                           "linear_probe_hi": probe.ci.high, "linear_probe_c": probe.c,
                           "features": int(train.shape[1]), "n_train": int(train.shape[0]),
                           "n_test": int(test.shape[0])}
    knn = weighted_knn(train, y_train, test, y_test, list(s.knn_k), s.knn_temperature,
                       level=s.level, device=device)
    for k, res in knn.items():
        row |= {f"weighted_knn_{k}": res.accuracy, f"weighted_knn_{k}_lo": res.ci.low,
                f"weighted_knn_{k}_hi": res.ci.high}
    return row


def evaluate_encoder(arch: str, model: nn.Module, x_train: np.ndarray, y_train: np.ndarray,
                     x_test: np.ndarray, y_test: np.ndarray, settings: ProbeSettings,
                     rng: np.random.Generator,
                     device: torch.device | None = None) -> dict[str, dict[str, Any]]:
    """``{representation: scores}`` of a frozen encoder (``head``, and ``backbone`` when it has
    one); inputs ``(N, *input_shape)``, labels ``(N,)`` integer ids."""
    split = split_encoder(arch, model)
    train = embed_features(split, x_train, ENCODE_BATCH, device)
    test = embed_features(split, x_test, ENCODE_BATCH, device)
    seeds = rng.spawn(len(split.names))
    return {name: _scores(train[name], y_train, test[name], y_test, settings, seed, device)
            for name, seed in zip(split.names, seeds, strict=True)}


def evaluate_inputs(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                    y_test: np.ndarray, settings: ProbeSettings,
                    rng: np.random.Generator) -> dict[str, Any]:
    """The scores of the raw inputs, flattened to vectors (``input``)."""
    def flat(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x, dtype=np.float32).reshape(len(x), -1)

    return _scores(flat(x_train), y_train, flat(x_test), y_test, settings, rng, None)
