"""sklearn's 8×8 digits: the only module here that imports sklearn (lazily; its data ships
with it)."""

from __future__ import annotations

from pipeline.datasets.images import image_dataset, split_indices
from pipeline.datasets.synthetic import Dataset


def digits_dataset(n_train: int, n_heldout: int, seed: int) -> Dataset:
    """sklearn's 1797 8×8 digits ``(N, 1, 8, 8)`` (pixel values 0..16, scaled to [0, 1])."""
    from sklearn.datasets import load_digits  # lazy: sklearn ships the data, nothing is fetched

    bunch = load_digits()
    images = bunch.images[:, None]
    rows = split_indices(images.shape[0], n_train, n_heldout, seed, "digits")
    return image_dataset("digits", images, bunch.target, rows, 16.0)
