"""The dataset registry: name → how to load it, its options, its augmentation (a plain dict).

``DATASETS[name].load(n_train, n_heldout, seed, options)`` returns a :class:`Dataset`; options are
first completed by :func:`resolve_dataset_options`. Each entry names its augmentation family
(``pipeline.datasets.augment.AUGMENTATIONS``) and that family's options with their defaults;
:func:`make_augmenter` turns (dataset name, augmentation options) into a view function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor

from pipeline.datasets import options as opt
from pipeline.datasets.augment import AUGMENTATIONS
from pipeline.datasets.digits import digits_dataset
from pipeline.datasets.gaussian_channel import gaussian_channel_dataset
from pipeline.datasets.images import cifar10_dataset, mnist_dataset
from pipeline.datasets.synthetic import Dataset, laplace_dataset
from pipeline.datasets.vectors import gaussian_mixture_dataset, sparse_binary_dataset

Loader = Callable[[int, int, int, Mapping[str, Any]], Dataset]
Augmenter = Callable[[Tensor, torch.Generator], Tensor]


@dataclass(frozen=True)
class DatasetSpec:
    """One registered dataset. ``defaults``/``augment_defaults`` list every option."""

    load: Loader
    defaults: Mapping[str, Any]
    checks: Mapping[str, opt.Check]
    kind: Literal["vector", "image"]
    labels: Literal["none", "class", "continuous"]
    augmentation: str
    augment_defaults: Mapping[str, Any]
    augment_checks: Mapping[str, opt.Check] = field(default_factory=dict)

    def validate(self, options: Mapping[str, Any], where: str = "data.options") -> None:
        """Raise ``ValueError("<where>.<key> = <value>: <allowed>")`` on an unknown or bad option."""
        opt.validate(self.checks, options, where)

    def validate_augment(self, options: Mapping[str, Any], where: str = "data.augment") -> None:
        opt.validate(self.augment_checks, options, where)


def _a_in_unit(v: Any) -> str | None:
    return None if opt.probability(v) is None else "the channel correlation A must be in [0, 1]"


def _a_below_one(v: Any) -> str | None:
    ok = opt.probability(v) is None and v < 1
    return None if ok else "the channel correlation A_c must be in [0, 1)"


CHANNEL_JITTER = ({"a": 0.6, "noise_std": 0.2, "dropout": 0.1, "scale_std": 0.1},
                  {"a": _a_in_unit, "noise_std": opt.non_negative, "dropout": opt.probability,
                   "scale_std": opt.non_negative})
IMAGE_CHECKS = {"crop_scale": opt.interval(0.01, 1.0), "crop_ratio": opt.interval(0.1, 10.0),
                "hflip": opt.boolean, "brightness": opt.probability, "contrast": opt.probability}


def _image_defaults(hflip: bool) -> dict[str, Any]:
    return {"crop_scale": [0.6, 1.0], "crop_ratio": [0.75, 4 / 3], "hflip": hflip,
            "brightness": 0.4, "contrast": 0.4}


DATASETS: dict[str, DatasetSpec] = {
    "laplace": DatasetSpec(
        load=lambda n, m, s, o: laplace_dataset(o["input_dim"], n, m, s),
        defaults={"input_dim": 1024}, checks={"input_dim": opt.positive_int},
        kind="vector", labels="none", augmentation="channel_jitter",
        augment_defaults=CHANNEL_JITTER[0], augment_checks=CHANNEL_JITTER[1]),
    "gaussian_mixture": DatasetSpec(
        load=lambda n, m, s, o: gaussian_mixture_dataset(o["input_dim"], n, m, s, o["components"],
                                                         o["mean_std"], o["component_std"]),
        defaults={"input_dim": 1024, "components": 25, "mean_std": 1.0, "component_std": 0.5},
        checks={"input_dim": opt.positive_int, "components": opt.positive_int,
                "mean_std": opt.non_negative, "component_std": opt.non_negative},
        kind="vector", labels="class", augmentation="channel_jitter",
        augment_defaults=CHANNEL_JITTER[0], augment_checks=CHANNEL_JITTER[1]),
    "sparse_binary": DatasetSpec(
        load=lambda n, m, s, o: sparse_binary_dataset(o["input_dim"], n, m, s, o["density"]),
        defaults={"input_dim": 1024, "density": 0.05},
        checks={"input_dim": opt.positive_int, "density": opt.probability},
        kind="vector", labels="none", augmentation="bit_flip",
        augment_defaults={"flip_prob": 0.001}, augment_checks={"flip_prob": opt.probability}),
    "gaussian_channel": DatasetSpec(
        load=lambda n, m, s, o: gaussian_channel_dataset(o["input_dim"], n, m, s),
        defaults={"input_dim": 32}, checks={"input_dim": opt.positive_int},
        kind="vector", labels="none", augmentation="channel",
        augment_defaults={"a": 0.6}, augment_checks={"a": _a_below_one}),
    "mnist": DatasetSpec(
        load=lambda n, m, s, o: mnist_dataset(n, m, s, o["path"]),
        defaults={"path": "../shared/data/mnist"}, checks={"path": opt.text},
        kind="image", labels="class", augmentation="image",
        augment_defaults=_image_defaults(hflip=False), augment_checks=IMAGE_CHECKS),
    "digits": DatasetSpec(
        load=lambda n, m, s, o: digits_dataset(n, m, s), defaults={}, checks={},
        kind="image", labels="class", augmentation="image",
        augment_defaults=_image_defaults(hflip=False), augment_checks=IMAGE_CHECKS),
    "cifar10": DatasetSpec(
        load=lambda n, m, s, o: cifar10_dataset(n, m, s, o["path"]),
        defaults={"path": "../shared/data/cifar-10-batches-py"}, checks={"path": opt.text},
        kind="image", labels="class", augmentation="image",
        augment_defaults=_image_defaults(hflip=True), augment_checks=IMAGE_CHECKS),
}


def _spec(name: str, where: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ValueError(f"{where} = {name!r}: unknown dataset; allowed: {sorted(DATASETS)}")
    return DATASETS[name]


def resolve_dataset_options(name: str, given: Mapping[str, Any] | None,
                            where: str = "data.options") -> dict[str, Any]:
    """Every option of dataset ``name``: defaults overlaid with ``given``, validated."""
    spec = _spec(name, "data.name")
    return opt.resolve(spec.checks, spec.defaults, given, where)


def resolve_augment_options(name: str, given: Mapping[str, Any] | None,
                            where: str = "data.augment") -> dict[str, Any]:
    """Every augmentation option of dataset ``name``: defaults overlaid with ``given``, validated."""
    spec = _spec(name, "data.name")
    return opt.resolve(spec.augment_checks, spec.augment_defaults, given, where)


def load_dataset(name: str, n_train: int, n_heldout: int, seed: int,
                 options: Mapping[str, Any] | None = None) -> Dataset:
    """Resolve the options of ``name`` and load it (x_* float32, see :class:`Dataset`)."""
    for key, value in (("n_train", n_train), ("n_heldout", n_heldout)):
        if opt.positive_int(value) is not None:
            raise ValueError(f"data.{key} = {value!r}: must be an integer > 0")
    return DATASETS[name].load(n_train, n_heldout, seed, resolve_dataset_options(name, options))


def make_augmenter(name: str, options: Mapping[str, Any] | None = None) -> Augmenter:
    """A view function ``(x, generator) -> x'`` (same shape) for dataset ``name``.

    ``options`` are the dataset's augmentation options (missing ones take their defaults):
    laplace / gaussian_mixture: channel + jitter (a, noise_std, dropout, scale_std);
    sparse_binary: bit flips (flip_prob); gaussian_channel: channel only (a);
    images: crop_scale, crop_ratio, hflip, brightness, contrast (see ``augment.image_view``).
    """
    resolved = resolve_augment_options(name, options)
    return functools.partial(AUGMENTATIONS[DATASETS[name].augmentation], **resolved)
