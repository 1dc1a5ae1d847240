"""Image datasets read from local files: MNIST and Fashion-MNIST (IDX gz), CIFAR-10 (python
pickles).

Nothing is downloaded: a missing file raises ``FileNotFoundError`` naming the path and how to get
it on a machine with internet access. Relative paths are taken from the repository root.
Images come out as float32 ``(N, C, H, W)`` in [0, 1], labels int64 ``(N,)``.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np

from pipeline.datasets.synthetic import Dataset

REPO_ROOT = Path(__file__).resolve().parents[2]
MNIST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
MNIST_HOWTO = ("download t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from "
               "https://ossci-datasets.s3.amazonaws.com/mnist/ (or torchvision.datasets.MNIST's "
               "raw/ folder) on a machine with internet and copy them there")
FASHION_FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
                 "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
FASHION_HOWTO = ("apt-get install dataset-fashion-mnist (Debian; it puts the four IDX files in "
                 "/usr/share/datasets/fashion-mnist), or on a machine with internet download "
                 "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
                 "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from "
                 "https://github.com/zalandoresearch/fashion-mnist (data/fashion), copy them to "
                 "one folder and point data.options.path at it")
FASHION_SPLITS = ("train_test", "test")
CIFAR_HOWTO = ("download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz on a machine with "
               "internet, unpack it and point data.options.path at its cifar-10-batches-py folder")


def resolve_path(path: str) -> Path:
    """An option path: absolute as given, relative ones from the repository root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else REPO_ROOT / p


def _require(path: Path, what: str, howto: str) -> None:
    if not path.exists():
        raise FileNotFoundError(f"{what} not found at {path}: {howto}")


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzip-compressed): uint8 array of the header's shape (LeCun's MNIST format)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not a uint8 IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape}, found {data.size} values")
    return data.reshape(shape)


def split_indices(n_available: int, n_train: int, n_heldout: int, seed: int,
                  name: str) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint train / held-out rows from one seeded permutation of ``n_available`` rows."""
    if n_train + n_heldout > n_available:
        raise ValueError(f"data.n_train + data.n_heldout = {n_train} + {n_heldout}: {name} has "
                         f"{n_available} images; the sum must be <= {n_available}")
    perm = np.random.default_rng(seed).permutation(n_available)
    return perm[:n_train], perm[n_train:n_train + n_heldout]


def image_dataset(name: str, images: np.ndarray, labels: np.ndarray, rows: tuple[np.ndarray, ...],
                   scale: float) -> Dataset:
    """images uint8/float ``(N, C, H, W)``; only the chosen rows are converted to float32."""
    tr, ho = rows
    as_float = [(images[r].astype(np.float32) / scale) for r in (tr, ho)]
    return Dataset(name, x_train=as_float[0], x_heldout=as_float[1],
                   y_train=labels[tr].astype(np.int64), y_heldout=labels[ho].astype(np.int64),
                   n_classes=10)


def mnist_dataset(n_train: int, n_heldout: int, seed: int, path: str) -> Dataset:
    """The 10k MNIST test images ``(N, 1, 28, 28)``, split by a seeded permutation."""
    folder = resolve_path(path)
    # the same steps as read_idx_split, left inline: editing them would change the code
    # fingerprint of every MNIST cell, and each would retrain once
    for fname in MNIST_FILES:
        _require(folder / fname, f"MNIST file {fname}", MNIST_HOWTO)
    images = read_idx(folder / MNIST_FILES[0])[:, None]
    labels = read_idx(folder / MNIST_FILES[1])
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{folder}: {images.shape[0]} images but {labels.shape[0]} labels")
    rows = split_indices(images.shape[0], n_train, n_heldout, seed, "mnist")
    return image_dataset("mnist", images, labels, rows, 255.0)


def read_idx_split(folder: Path, files: tuple[str, str], what: str,
                   howto: str) -> tuple[np.ndarray, np.ndarray]:
    """One split of an IDX image set: uint8 images ``(N, 1, H, W)`` and labels ``(N,)``.

    ``files``: (images file, labels file) in ``folder``; ``what`` and ``howto`` word the error
    when one is missing.
    """
    for fname in files:
        _require(folder / fname, f"{what} file {fname}", howto)
    images, labels = read_idx(folder / files[0]), read_idx(folder / files[1])
    if len(images) != len(labels):
        raise ValueError(f"{folder}: {files[0]} has {len(images)} images but {files[1]} has "
                         f"{len(labels)} labels")
    return images[:, None], labels


def _seeded_subset(key: str, n: int, available: int, source: str,
                   rng: np.random.Generator) -> np.ndarray:
    """``n`` of ``available`` rows, a random subset drawn with ``rng`` (``key``: the param)."""
    if n > available:
        raise ValueError(f"data.{key} = {n}: {source} has {available} images; "
                         f"must be <= {available}")
    return rng.permutation(available)[:n]


def fashion_mnist_dataset(n_train: int, n_heldout: int, seed: int, path: str,
                          split: str = "train_test") -> Dataset:
    """Fashion-MNIST ``(N, 1, 28, 28)``: 10 classes of Zalando article images (Xiao et al. 2017,
    arXiv 1708.07747), from the four IDX files in ``path``.

    ``split="train_test"``: the training rows are a seeded random subset of the 60 000 train
    images, the held-out rows one of the 10 000 test images (as ``cifar10_dataset``);
    ``split="test"``: both come from the test images, disjoint, by one seeded permutation (as
    ``mnist_dataset``), and the train files are not read.
    """
    if split not in FASHION_SPLITS:
        raise ValueError(f"data.options.split = {split!r}: allowed: {list(FASHION_SPLITS)}")
    folder = resolve_path(path)
    x_te, y_te = read_idx_split(folder, FASHION_FILES["test"], "Fashion-MNIST", FASHION_HOWTO)
    if split == "test":
        rows = split_indices(len(x_te), n_train, n_heldout, seed,
                             "fashion_mnist's test split (data.options.split = 'test')")
        return image_dataset("fashion_mnist", x_te, y_te, rows, 255.0)
    x_tr, y_tr = read_idx_split(folder, FASHION_FILES["train"], "Fashion-MNIST", FASHION_HOWTO)
    tr = _seeded_subset("n_train", n_train, len(x_tr), "fashion_mnist's train split",
                        np.random.default_rng(seed))
    ho = _seeded_subset("n_heldout", n_heldout, len(x_te), "fashion_mnist's test split",
                        np.random.default_rng([seed, 1]))
    # the chosen rows only, stacked, so that image_dataset converts no more than them
    images, labels = np.concatenate([x_tr[tr], x_te[ho]]), np.concatenate([y_tr[tr], y_te[ho]])
    return image_dataset("fashion_mnist", images, labels,
                         (np.arange(n_train), n_train + np.arange(n_heldout)), 255.0)


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled CIFAR-10 batch: uint8 ``(n, 3, 32, 32)`` and labels ``(n,)``."""
    _require(path, f"CIFAR-10 batch {path.name}", CIFAR_HOWTO)
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")  # the official format; local trusted files only
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    return data, np.asarray(batch[b"labels"], dtype=np.int64)


def cifar10_dataset(n_train: int, n_heldout: int, seed: int, path: str) -> Dataset:
    """CIFAR-10 ``(N, 3, 32, 32)``: train rows from data_batch_1..5, held-out rows from test_batch.

    Each side is a seeded random subset (n_train <= 50000, n_heldout <= 10000).
    """
    folder = resolve_path(path)
    _require(folder, "CIFAR-10 folder cifar-10-batches-py", CIFAR_HOWTO)
    parts = [_read_cifar_batch(folder / f"data_batch_{i}") for i in range(1, 6)]
    x_tr, y_tr = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    x_te, y_te = _read_cifar_batch(folder / "test_batch")
    for key, n, avail, src in (("n_train", n_train, x_tr.shape[0], "data_batch_1..5"),
                               ("n_heldout", n_heldout, x_te.shape[0], "test_batch")):
        if n > avail:
            raise ValueError(f"data.{key} = {n}: cifar10 draws it from {src}, which has {avail} "
                             f"images; must be <= {avail}")
    tr = np.random.default_rng(seed).permutation(x_tr.shape[0])[:n_train]
    ho = np.random.default_rng([seed, 1]).permutation(x_te.shape[0])[:n_heldout]
    return Dataset("cifar10", x_train=x_tr[tr].astype(np.float32) / 255.0,
                   x_heldout=x_te[ho].astype(np.float32) / 255.0,
                   y_train=y_tr[tr], y_heldout=y_te[ho], n_classes=10)
