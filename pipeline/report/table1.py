"""Betser et al. (2026), Table 1, typed once (SPEC.md §2): the published settings and their
values of the registry's statistics with a Gaussian null (CV, AD Avg, AD pass, DP Avg, DP pass).
:mod:`pipeline.report.papers` (the synthetic rows) and :mod:`pipeline.report.image_rows` (the
CIFAR-10 rows) read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.metrics import METRICS

# Table 1's columns, in their order: the registry's statistics with a Gaussian null
STATS = tuple(m.name for m in METRICS.values() if "null_" in m.families)
STAT_LABELS = {s: METRICS[s].label for s in STATS}


@dataclass(frozen=True)
class Published:
    setting: str
    values: Mapping[str, float]


# Table 1, unnormalised embeddings. Key: (data.name, arch, objective).
BETSER_TABLE1: dict[tuple[str, str, str], Published] = {
    ("laplace", "linear", "contrastive"): Published(
        "Laplace, linear encoder", {"cv": 0.08, "ad_mean": 0.38, "ad_pass_frac": 1.0,
                                    "dp_p_mean": 0.49, "dp_pass_frac": 1.0}),
    ("gaussian_mixture", "linear", "contrastive"): Published(
        "Gaussian mixture, linear", {"cv": 0.08, "ad_mean": 0.39, "ad_pass_frac": 1.0,
                                     "dp_p_mean": 0.46, "dp_pass_frac": 1.0}),
    ("cifar10", "resnet18", "supervised"): Published(
        "CIFAR-10 ResNet-18 supervised", {"cv": 0.5, "ad_mean": 3.3, "ad_pass_frac": 0.062,
                                          "dp_p_mean": 0.041, "dp_pass_frac": 0.039}),
    ("cifar10", "resnet18", "contrastive"): Published(
        "CIFAR-10 ResNet-18 contrastive", {"cv": 0.09, "ad_mean": 0.43, "ad_pass_frac": 0.961,
                                           "dp_p_mean": 0.39, "dp_pass_frac": 0.945}),
}
