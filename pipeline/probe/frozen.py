"""The frozen-feature protocols of one encoder, for every representation it has (SPEC.md §5).

:func:`evaluate_encoder` embeds the training and held-out splits with a frozen encoder — its
output (``head``) and, for an encoder with a backbone and a head, the backbone's features
(``backbone``, what the field probes) — in one forward pass per batch, and runs the linear probe
and the weighted kNN on each. :func:`evaluate_inputs` runs them on the raw inputs (pixels or
input vectors, flattened): the baseline a learned representation should beat.

The probe is fitted on the whole training split of the dataset (not the cell's subsample of n
rows), so that cells of different n are scored alike, as SSL benchmarks score every encoder on
the same labelled training set. :func:`fewshot_scores` runs the few-shot probes of one episode
(:mod:`pipeline.probe.fewshot`) on the same features and on the raw inputs. Pure torch/numpy.
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
from pipeline.probe.fewshot import fewshot_knn, fewshot_linear_probe
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
    shots: Sequence[int] = ()  # few-shot probes: labelled rows per class (empty: none)
    episodes: int = 5  # draws per value of shots


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


def encoder_features(arch: str, model: nn.Module, x_train: np.ndarray, x_test: np.ndarray,
                     device: torch.device | None = None) -> tuple[dict[str, np.ndarray],
                                                                  dict[str, np.ndarray]]:
    """(training features, test features) of every representation of a frozen encoder, each
    ``{representation: (N, d) float32}`` (``head``, and ``backbone`` when it has one)."""
    split = split_encoder(arch, model)
    return (embed_features(split, x_train, ENCODE_BATCH, device),
            embed_features(split, x_test, ENCODE_BATCH, device))


def evaluate_features(train: dict[str, np.ndarray], y_train: np.ndarray,
                      test: dict[str, np.ndarray], y_test: np.ndarray, settings: ProbeSettings,
                      rng: np.random.Generator,
                      device: torch.device | None = None) -> dict[str, dict[str, Any]]:
    """``{representation: scores}`` of :func:`encoder_features`' output."""
    seeds = rng.spawn(len(train))
    return {name: _scores(train[name], y_train, test[name], y_test, settings, seed, device)
            for name, seed in zip(train, seeds, strict=True)}


def evaluate_encoder(arch: str, model: nn.Module, x_train: np.ndarray, y_train: np.ndarray,
                     x_test: np.ndarray, y_test: np.ndarray, settings: ProbeSettings,
                     rng: np.random.Generator,
                     device: torch.device | None = None) -> dict[str, dict[str, Any]]:
    """``{representation: scores}`` of a frozen encoder (``head``, and ``backbone`` when it has
    one); inputs ``(N, *input_shape)``, labels ``(N,)`` integer ids."""
    train, test = encoder_features(arch, model, x_train, x_test, device)
    return evaluate_features(train, y_train, test, y_test, settings, rng, device)


def _flat(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).reshape(len(x), -1)


def evaluate_inputs(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                    y_test: np.ndarray, settings: ProbeSettings,
                    rng: np.random.Generator) -> dict[str, Any]:
    """The scores of the raw inputs, flattened to vectors (``input``)."""
    return _scores(_flat(x_train), y_train, _flat(x_test), y_test, settings, rng, None)


def _fewshot_row(train: np.ndarray, y_train: np.ndarray, test: np.ndarray, y_test: np.ndarray,
                 s: ProbeSettings, rng: np.random.Generator, device: torch.device | None,
                 prefix: str = "") -> dict[str, Any]:
    probe = fewshot_linear_probe(train, y_train, test, y_test, s.c_grid, rng, level=s.level,
                                 device=device)
    row: dict[str, Any] = {f"{prefix}linear_probe": probe.accuracy,
                           f"{prefix}linear_probe_c": probe.c}
    knn = fewshot_knn(train, y_train, test, y_test, list(s.knn_k), s.knn_temperature,
                      level=s.level, device=device)
    return row | {f"{prefix}weighted_knn_{k}": res.accuracy for k, res in knn.items()}


def fewshot_scores(train: dict[str, np.ndarray], x_train: np.ndarray, y_train: np.ndarray,
                   test: dict[str, np.ndarray], x_test: np.ndarray, y_test: np.ndarray,
                   rows: np.ndarray, settings: ProbeSettings, rngs: dict[str, np.random.Generator],
                   device: torch.device | None = None) -> dict[str, dict[str, Any]]:
    """One episode: ``{representation: scores}`` of the few-shot probes fitted on the training
    rows ``rows`` (:func:`pipeline.probe.fewshot.draw_episode`) of each representation's
    features, scored on the whole test split; every row also holds the raw inputs' scores on the
    same draw (``raw_`` columns). ``rngs``: one generator per representation and ``input`` (the
    folds that choose C; generators in the same state give every representation the same folds).

    Scores: ``linear_probe`` (top-1 accuracy on the test split, a fraction), ``linear_probe_c``
    (the chosen C), ``weighted_knn_<k>`` per k of ``probe.knn_k``; ``n_train`` (the drawn rows),
    ``n_test``, ``n_classes``.
    """
    y_drawn = y_train[rows]
    raw = _fewshot_row(_flat(x_train[rows]), y_drawn, _flat(x_test), y_test, settings,
                       rngs["input"], None, prefix="raw_")
    sizes = {"n_train": int(rows.size), "n_test": int(len(y_test)),
             "n_classes": int(np.unique(y_drawn).size)}
    return {name: sizes | _fewshot_row(train[name][rows], y_drawn, test[name], y_test, settings,
                                       rngs[name], device) | raw for name in train}
