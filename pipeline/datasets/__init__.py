"""Datasets and augmentation channels (SPEC.md §2, §4): generators, local image sets, views.

Pure numpy/torch; the image loaders read local files only (nothing is downloaded).
"""

from pipeline.datasets.gaussian_channel import (
    gaussian_channel_log_ratio,
    gaussian_channel_log_ratio_matrix,
    gaussian_channel_second_moment,
)
from pipeline.datasets.registry import (
    DATASETS,
    DatasetSpec,
    load_dataset,
    make_augmenter,
    resolve_augment_options,
    resolve_dataset_options,
)
from pipeline.datasets.synthetic import (
    Dataset,
    augment,
    channel,
    jitter,
    laplace_dataset,
)

__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetSpec",
    "augment",
    "channel",
    "gaussian_channel_log_ratio",
    "gaussian_channel_log_ratio_matrix",
    "gaussian_channel_second_moment",
    "jitter",
    "laplace_dataset",
    "load_dataset",
    "make_augmenter",
    "resolve_augment_options",
    "resolve_dataset_options",
]
