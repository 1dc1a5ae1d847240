"""Trained enough (SPEC §7): a verdict about what training does is reported only for encoders that
learned, with the criterion stated beside it.

The criterion (:data:`CRITERION`), per layer and per trained encoder, on the probe stage's
columns (:mod:`pipeline.report.grid.probe`; SPEC §5): its linear probe accuracy and its weighted kNN
accuracy (the smallest k among the ``weighted_knn_<k>`` columns present), each the mean over
seeds of the seeds' means, beat the same encoder's untrained (epoch 0, the same layer:
``control_`` / ``backbone_control_``), and its linear probe beats the raw inputs'
(``raw_linear_probe``). A claim that compares two trained encoders (contrastive vs supervised)
needs both to pass: a verdict that one objective makes features more Gaussian says nothing about
training when the other encoder has not learned yet. Values only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from pipeline.metrics import KNN_PREFIX

CRITERION = ("trained enough: each trained encoder's linear probe and weighted kNN accuracy "
             "(smallest k; means over seeds) beat the untrained encoder's (epoch 0, same layer), "
             "and its linear probe beats the raw inputs' linear probe")
NOT_CHECKED = "trained-enough not checked (no probe)"
PROBE = "linear_probe"


@dataclass(frozen=True)
class ProbeCheck:
    """One comparison of the criterion: ``encoder``'s ``score`` (its mean over seeds, ``value``)
    against the ``against`` reference's (``reference``); passed when strictly greater."""

    encoder: str  # contrastive, supervised
    score: str  # "linear probe", "weighted kNN (k = 20)"
    value: float
    against: str  # "untrained", "raw inputs"
    reference: float

    @property
    def passed(self) -> bool:
        return bool(self.value > self.reference)


@dataclass(frozen=True)
class TrainedEnough:
    """The criterion's text, each comparison it could make (``checks``) and those it could not
    (``missing``: no column or no value). ``passed``: every check passed; None when none could be
    made (no probe columns)."""

    criterion: str
    checks: tuple[ProbeCheck, ...]
    missing: tuple[str, ...] = ()

    @property
    def passed(self) -> bool | None:
        return None if not self.checks else all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[ProbeCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def of(self, *encoders: str) -> TrainedEnough:
        """The same check for some of the encoders only."""
        return TrainedEnough(self.criterion, tuple(c for c in self.checks if c.encoder in encoders),
                             tuple(m for m in self.missing if m.split(" ", 1)[0] in encoders))


def _over_seeds(part: pd.DataFrame, col: str) -> float | None:
    """The mean over seeds of each seed's mean of ``col``; None without a value."""
    if col not in part or not part[col].notna().any():
        return None
    if "seed" not in part:
        return float(part[col].mean())
    return float(part.groupby("seed")[col].mean().dropna().mean())


def knn_column(part: pd.DataFrame, prefix: str) -> str | None:
    """``<prefix>weighted_knn_<k>`` with the smallest k that has a value (None: none)."""
    pattern = re.compile(rf"^{re.escape(prefix + KNN_PREFIX)}(\d+)$")
    ks = sorted(int(m.group(1)) for c in part.columns if (m := pattern.match(c))
                and part[c].notna().any())
    return f"{prefix}{KNN_PREFIX}{ks[0]}" if ks else None


def trained_enough(encoders: Mapping[str, pd.DataFrame], prefix: str,
                   raw: float | None) -> TrainedEnough:
    """The criterion on one layer (column ``prefix``: "" for the head, "backbone_") for each
    named encoder's cells (``{"contrastive": cells, "supervised": cells}``); ``raw``: the raw
    inputs' linear probe (None: not run)."""
    checks: list[ProbeCheck] = []
    missing: list[str] = []

    def check(name: str, score: str, value: float | None, against: str,
              reference: float | None) -> None:
        if value is None or reference is None:
            missing.append(f"{name} {score} vs {against}")
        else:
            checks.append(ProbeCheck(name, score, value, against, reference))

    for name, part in encoders.items():
        probe = _over_seeds(part, prefix + PROBE)
        untrained = _over_seeds(part, f"{prefix}control_{PROBE}")
        check(name, "linear probe", probe, "untrained", untrained)
        knn = knn_column(part, prefix)
        if knn is None:
            missing.append(f"{name} weighted kNN vs untrained")
        else:
            k = knn.removeprefix(prefix + KNN_PREFIX)
            control = f"{prefix}control_{KNN_PREFIX}{k}"
            check(name, f"weighted kNN (k = {k})", _over_seeds(part, knn), "untrained",
                  _over_seeds(part, control))
        check(name, "linear probe", probe, "raw inputs", raw)
    return TrainedEnough(CRITERION, tuple(checks), tuple(missing))
