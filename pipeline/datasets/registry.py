"""The dataset registry: name → how to load it, its options, its augmentation (a plain dict).

``DATASETS[name].load(n_train, n_heldout, seed, options)`` returns a :class:`Dataset`; options are
first completed by :func:`resolve_dataset_options`. Each entry names its augmentation family
(``pipeline.datasets.augment.AUGMENTATIONS``), whose options dataclass declares its options;
:func:`make_augmenter` turns (dataset name, augmentation options) into a view function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import torch
from annotated_types import Ge, Gt, Interval, Len
from torch import Tensor

from pipeline.datasets.augment import AUGMENTATIONS
from pipeline.datasets.digits import digits_dataset
from pipeline.datasets.gaussian_channel import gaussian_channel_dataset
from pipeline.datasets.images import cifar10_dataset, fashion_mnist_dataset, mnist_dataset
from pipeline.datasets.synthetic import Dataset, laplace_dataset
from pipeline.datasets.vectors import gaussian_mixture_dataset, sparse_binary_dataset
from pipeline.options import NoOptions, defaults, fill, option

Loader = Callable[[int, int, int, Mapping[str, Any]], Dataset]
Augmenter = Callable[[Tensor, torch.Generator], Tensor]
Dim = Annotated[int, Gt(0)]


@dataclass(frozen=True)
class DatasetSpec:
    """One registered dataset.

    ``options``: a frozen dataclass of its options (``data.options``; see :mod:`pipeline.options`).
    ``augmentation``: its family of views in :data:`AUGMENTATIONS`, whose options dataclass is
    ``data.augment``; ``augment_defaults`` overrides that family's defaults for this dataset.
    ``labels``: what the loader gives as ``y`` (class ids, continuous values, or nothing).
    ``modules``: where the data are made or read, for readers (the code fingerprint follows the
    loader's references and does not read it).
    """

    load: Loader
    options: type
    kind: Literal["vector", "image"]
    labels: Literal["none", "class", "continuous"]
    augmentation: str
    augment_defaults: Mapping[str, Any] = field(default_factory=dict)
    modules: tuple[str, ...] = ()  # where the data are made or read

    @property
    def augment_options(self) -> type:
        return AUGMENTATIONS[self.augmentation].options

    @property
    def defaults(self) -> dict[str, Any]:
        return defaults(self.options)


@dataclass(frozen=True)
class VectorOptions:
    input_dim: Dim = option(1024, "dimension of the input vectors")


@dataclass(frozen=True)
class ChannelDataOptions:
    input_dim: Dim = option(32, "dimension p of the N(0, I_p) inputs")


@dataclass(frozen=True)
class MixtureOptions:
    input_dim: Dim = option(1024, "dimension of the input vectors")
    components: Dim = option(25, "number of mixture components (the class labels)")
    mean_std: Annotated[float, Ge(0)] = option(1.0, "std of the component means")
    component_std: Annotated[float, Ge(0)] = option(0.5, "std within a component")


@dataclass(frozen=True)
class SparseBinaryOptions:
    input_dim: Dim = option(1024, "number of bits")
    density: Annotated[float, Interval(gt=0, lt=1)] = option(0.05, "probability that a bit is 1")


LocalPath = Annotated[str, Len(1)]


@dataclass(frozen=True)
class MnistOptions:
    path: LocalPath = option("../shared/data/mnist",
                             "folder of the IDX files (t10k-images-idx3-ubyte, ...)")


@dataclass(frozen=True)
class FashionMnistOptions:
    path: LocalPath = option("/usr/share/datasets/fashion-mnist",
                             "folder of the four IDX files (train-images-idx3-ubyte.gz, ...; "
                             "Debian: apt-get install dataset-fashion-mnist)")
    split: Literal["train_test", "test"] = option(
        "train_test", "train_test: training rows from the 60 000 train images, held-out rows "
        "from the 10 000 test images; test: both from the test images, disjoint (as mnist)")


@dataclass(frozen=True)
class Cifar10Options:
    path: LocalPath = option("../shared/data/cifar-10-batches-py",
                             "the extracted python version of CIFAR-10")


DATASETS: dict[str, DatasetSpec] = {
    "laplace": DatasetSpec(
        load=lambda n, m, s, o: laplace_dataset(o["input_dim"], n, m, s),
        options=VectorOptions, kind="vector", labels="none", augmentation="channel_jitter",
        modules=("pipeline.datasets.synthetic",)),
    "gaussian_mixture": DatasetSpec(
        load=lambda n, m, s, o: gaussian_mixture_dataset(o["input_dim"], n, m, s, o["components"],
                                                         o["mean_std"], o["component_std"]),
        options=MixtureOptions, kind="vector", labels="class", augmentation="channel_jitter",
        modules=("pipeline.datasets.vectors",)),
    "sparse_binary": DatasetSpec(
        load=lambda n, m, s, o: sparse_binary_dataset(o["input_dim"], n, m, s, o["density"]),
        options=SparseBinaryOptions, kind="vector", labels="none", augmentation="bit_flip",
        modules=("pipeline.datasets.vectors",)),
    "gaussian_channel": DatasetSpec(
        load=lambda n, m, s, o: gaussian_channel_dataset(o["input_dim"], n, m, s),
        options=ChannelDataOptions, kind="vector", labels="none", augmentation="channel",
        modules=("pipeline.datasets.gaussian_channel",)),
    "mnist": DatasetSpec(
        load=lambda n, m, s, o: mnist_dataset(n, m, s, o["path"]),
        options=MnistOptions, kind="image", labels="class", augmentation="image",
        modules=("pipeline.datasets.images",)),
    "fashion_mnist": DatasetSpec(
        load=lambda n, m, s, o: fashion_mnist_dataset(n, m, s, o["path"], o["split"]),
        options=FashionMnistOptions, kind="image", labels="class", augmentation="image",
        modules=("pipeline.datasets.images",)),
    "digits": DatasetSpec(
        load=lambda n, m, s, o: digits_dataset(n, m, s),
        options=NoOptions, kind="image", labels="class", augmentation="image",
        modules=("pipeline.datasets.digits",)),
    "cifar10": DatasetSpec(
        load=lambda n, m, s, o: cifar10_dataset(n, m, s, o["path"]),
        options=Cifar10Options, kind="image", labels="class", augmentation="image",
        augment_defaults={"hflip": True}, modules=("pipeline.datasets.images",)),
}


def _spec(name: str, where: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ValueError(f"{where} = {name!r}: unknown dataset; allowed: {sorted(DATASETS)}")
    return DATASETS[name]


def resolve_dataset_options(name: str, given: Mapping[str, Any] | None,
                            where: str = "data.options") -> dict[str, Any]:
    """Every option of dataset ``name``: its defaults overlaid with ``given`` (values are
    validated by the params schema, ``pipeline.config``)."""
    return fill(_spec(name, "data.name").options, given, where)


def resolve_augment_options(name: str, given: Mapping[str, Any] | None,
                            where: str = "data.augment") -> dict[str, Any]:
    """Every augmentation option of dataset ``name``: defaults overlaid with ``given``."""
    spec = _spec(name, "data.name")
    return fill(spec.augment_options, {**spec.augment_defaults, **dict(given or {})}, where)


def load_dataset(name: str, n_train: int, n_heldout: int, seed: int,
                 options: Mapping[str, Any] | None = None) -> Dataset:
    """Resolve the options of ``name`` and load it (x_* float32, see :class:`Dataset`)."""
    for key, value in (("n_train", n_train), ("n_heldout", n_heldout)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
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
    return functools.partial(AUGMENTATIONS[DATASETS[name].augmentation].view, **resolved)
