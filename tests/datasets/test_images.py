"""Image sets from local files: MNIST (real files), IDX format, CIFAR-10 on a fake folder."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from pipeline.datasets import load_dataset
from pipeline.datasets.images import read_idx

MNIST = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mnist"  # ../shared
MNIST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]  # the README's counts


@pytest.mark.skipif(not (MNIST / "t10k-images-idx3-ubyte.gz").exists(), reason="no MNIST files")
def test_mnist_real_files_split_and_counts():
    ds = load_dataset("mnist", 7000, 3000, seed=0, options={"path": str(MNIST)})
    assert ds.x_train.shape == (7000, 1, 28, 28) and ds.x_heldout.shape == (3000, 1, 28, 28)
    assert ds.x_train.dtype == np.float32 and ds.x_train.min() == 0 and ds.x_train.max() == 1
    labels = np.concatenate([ds.y_train, ds.y_heldout])
    assert np.bincount(labels, minlength=10).tolist() == MNIST_COUNTS
    again = load_dataset("mnist", 7000, 3000, seed=0, options={"path": str(MNIST)})
    other = load_dataset("mnist", 7000, 3000, seed=1, options={"path": str(MNIST)})
    assert again.content_hash() == ds.content_hash() != other.content_hash()
    # the default path (relative to the repo root) points at the same files
    assert load_dataset("mnist", 10, 5, seed=0).content_hash() == load_dataset(
        "mnist", 10, 5, seed=0, options={"path": str(MNIST)}).content_hash()


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_loader_on_written_idx_files(tmp_path):
    images = np.arange(12 * 28 * 28).reshape(12, 28, 28) % 256
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", images)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.arange(12) % 10)
    np.testing.assert_array_equal(read_idx(tmp_path / "t10k-images-idx3-ubyte.gz"), images)
    ds = load_dataset("mnist", 8, 4, seed=0, options={"path": str(tmp_path)})
    rows = [int(np.where(np.all(images == np.rint(x[0] * 255), axis=(1, 2)))[0][0])
            for x in np.concatenate([ds.x_train, ds.x_heldout])]
    assert sorted(rows) == list(range(12))  # a permutation: disjoint and complete
    np.testing.assert_array_equal(np.concatenate([ds.y_train, ds.y_heldout]), np.array(rows) % 10)


def test_missing_mnist_names_the_path_and_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path}.*on a machine with internet"):
        load_dataset("mnist", 10, 10, seed=0, options={"path": str(tmp_path)})


def _fake_cifar(folder: Path, per_batch: int) -> None:
    """The cifar-10-batches-py layout: pickled dicts with bytes keys, rows = R, G, B planes."""
    folder.mkdir()
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for b, name in enumerate(names):
        idx = b * per_batch + np.arange(per_batch)
        planes = [np.full((per_batch, 1024), 0), np.full((per_batch, 1024), 100),
                  idx[:, None].repeat(1024, 1)]  # R = 0, G = 100, B = the image's index
        data = np.concatenate(planes, axis=1).astype(np.uint8)
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": (idx % 10).tolist(), b"batch_label": name}, f)


def test_cifar_loader_on_a_fake_folder(tmp_path):
    _fake_cifar(tmp_path / "cifar-10-batches-py", per_batch=4)
    opts = {"path": str(tmp_path / "cifar-10-batches-py")}
    ds = load_dataset("cifar10", 12, 3, seed=0, options=opts)
    assert ds.x_train.shape == (12, 3, 32, 32) and ds.x_heldout.shape == (3, 3, 32, 32)
    assert np.all(ds.x_train[:, 0] == 0) and np.allclose(ds.x_train[:, 1], 100 / 255)
    train_ids = np.rint(ds.x_train[:, 2, 0, 0] * 255).astype(int)
    test_ids = np.rint(ds.x_heldout[:, 2, 0, 0] * 255).astype(int)
    assert len(set(train_ids)) == 12 and set(train_ids) <= set(range(20))  # data batches only
    assert set(test_ids) <= set(range(20, 24))  # held-out from test_batch
    np.testing.assert_array_equal(ds.y_train, train_ids % 10)
    assert load_dataset("cifar10", 12, 3, seed=0, options=opts).content_hash() == ds.content_hash()
    with pytest.raises(ValueError, match=r"data.n_heldout = 5: .*test_batch.* must be <= 4"):
        load_dataset("cifar10", 12, 5, seed=0, options=opts)


def test_missing_cifar_names_the_path_and_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path}/nothing.*cifar-10-python.tar.gz"):
        load_dataset("cifar10", 10, 10, seed=0, options={"path": str(tmp_path / "nothing")})
