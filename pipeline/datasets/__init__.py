"""Datasets and augmentation channels (SPEC.md §2). Pure numpy/torch; no file I/O here."""

from pipeline.datasets.synthetic import Dataset, augment, channel, laplace_dataset, make_dataset

__all__ = ["Dataset", "augment", "channel", "laplace_dataset", "make_dataset"]
