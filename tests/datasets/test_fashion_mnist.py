"""Fashion-MNIST: the loader on IDX files written here (rows traced back to what was written),
both splits, the errors, the Debian package's files when installed, and a params file naming it."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.config import ConfigError, expand, load
from pipeline.datasets import load_dataset
from pipeline.datasets.images import fashion_mnist_dataset, read_idx_split

DEBIAN = Path("/usr/share/datasets/fashion-mnist")  # the package dataset-fashion-mnist
TRAIN = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
TEST = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _write_idx(path: Path, array: np.ndarray) -> None:
    """LeCun's IDX layout: 0, 0, type 0x08 (uint8), ndim, the sizes big-endian, the bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def folder(tmp_path, rng):
    """30 train and 12 test images, 28 × 28, random bytes (so each image is its own fingerprint)
    with a 0 and a 255 in each, labels 0..9 repeating; returns (folder, arrays written)."""
    written = {}
    for split, files, n in (("train", TRAIN, 30), ("test", TEST, 12)):
        images = rng.integers(0, 256, size=(n, 28, 28))
        images[:, 0, 0], images[:, 0, 1] = 0, 255
        labels = (np.arange(n) + (3 if split == "test" else 0)) % 10
        _write_idx(tmp_path / files[0], images)
        _write_idx(tmp_path / files[1], labels)
        written[split] = (images, labels)
    return tmp_path, written


def _sources(x: np.ndarray, images: np.ndarray) -> list[int]:
    """For each loaded row, the index of the written image it is (decoded back to bytes)."""
    as_bytes = np.rint(x[:, 0] * 255).astype(np.int64)
    hits = [np.flatnonzero((images == row).all(axis=(1, 2))) for row in as_bytes]
    assert all(len(h) == 1 for h in hits), "a loaded row matches no written image"
    return [int(h[0]) for h in hits]


def test_train_rows_from_the_train_files_held_out_rows_from_the_test_files(folder):
    path, written = folder
    ds = load_dataset("fashion_mnist", 20, 8, seed=0, options={"path": str(path)})
    assert ds.name == "fashion_mnist" and ds.n_classes == 10
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_heldout.shape == (8, 1, 28, 28)
    assert ds.x_train.dtype == ds.x_heldout.dtype == np.float32
    assert ds.y_train.dtype == ds.y_heldout.dtype == np.int64
    assert ds.x_train.min() == 0 and ds.x_train.max() == 1 and ds.x_heldout.max() == 1
    for x, y, (images, labels) in ((ds.x_train, ds.y_train, written["train"]),
                                   (ds.x_heldout, ds.y_heldout, written["test"])):
        rows = _sources(x, images)
        assert len(set(rows)) == len(rows)  # no image twice
        np.testing.assert_array_equal(x[:, 0], images[rows].astype(np.float32) / 255)
        np.testing.assert_array_equal(y, labels[rows])
    # a seeded random subset: not the first rows in order, the same again, another seed differs
    assert _sources(ds.x_train, written["train"][0]) != list(range(20))
    again = load_dataset("fashion_mnist", 20, 8, seed=0, options={"path": str(path)})
    other = load_dataset("fashion_mnist", 20, 8, seed=1, options={"path": str(path)})
    assert again.content_hash() == ds.content_hash() != other.content_hash()


def test_the_test_split_option_draws_both_sides_from_the_test_files(folder):
    path, written = folder
    for fname in TRAIN:  # not needed, so not read
        (path / fname).unlink()
    ds = load_dataset("fashion_mnist", 9, 3, seed=0, options={"path": str(path), "split": "test"})
    images, labels = written["test"]
    train_rows, heldout_rows = _sources(ds.x_train, images), _sources(ds.x_heldout, images)
    assert sorted(train_rows + heldout_rows) == list(range(12))  # disjoint, all 12 used
    np.testing.assert_array_equal(ds.y_train, labels[train_rows])
    np.testing.assert_array_equal(ds.y_heldout, labels[heldout_rows])
    assert ds.x_train.shape == (9, 1, 28, 28) and ds.y_train.dtype == np.int64
    with pytest.raises(ValueError, match=r"data.n_train \+ data.n_heldout = 10 \+ 3: "
                                         r"fashion_mnist's test split .* has 12 images; "
                                         r"the sum must be <= 12"):
        load_dataset("fashion_mnist", 10, 3, seed=0, options={"path": str(path), "split": "test"})


def test_sizes_past_a_split_name_the_parameter_value_and_limit(folder):
    path, _ = folder
    opts = {"path": str(path)}
    with pytest.raises(ValueError, match=r"^data.n_train = 31: fashion_mnist's train split has "
                                         r"30 images; must be <= 30$"):
        load_dataset("fashion_mnist", 31, 5, seed=0, options=opts)
    with pytest.raises(ValueError, match=r"^data.n_heldout = 13: fashion_mnist's test split has "
                                         r"12 images; must be <= 12$"):
        load_dataset("fashion_mnist", 30, 13, seed=0, options=opts)
    with pytest.raises(ValueError, match=r"^data.options.split = 'val': allowed: "
                                         r"\['train_test', 'test'\]$"):
        fashion_mnist_dataset(5, 5, 0, str(path), split="val")


def test_a_missing_file_names_it_the_path_and_how_to_get_it(folder):
    path, _ = folder
    (path / TRAIN[1]).unlink()
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("fashion_mnist", 5, 5, seed=0, options={"path": str(path)})
    message = str(info.value)
    assert message.startswith(f"Fashion-MNIST file {TRAIN[1]} not found at {path / TRAIN[1]}: ")
    assert "apt-get install dataset-fashion-mnist" in message
    assert "https://github.com/zalandoresearch/fashion-mnist" in message
    assert "on a machine with internet" in message and "data.options.path" in message
    with pytest.raises(FileNotFoundError, match=rf"{TEST[0]} not found at {path / 'no' / TEST[0]}"):
        load_dataset("fashion_mnist", 5, 5, seed=0, options={"path": str(path / "no")})


def test_images_and_labels_of_different_lengths_are_refused(tmp_path):
    _write_idx(tmp_path / TEST[0], np.zeros((4, 28, 28)))
    _write_idx(tmp_path / TEST[1], np.zeros(3))
    with pytest.raises(ValueError, match=rf"{TEST[0]} has 4 images but {TEST[1]} has 3 labels"):
        read_idx_split(tmp_path, TEST, "Fashion-MNIST", "")


@pytest.mark.skipif(not (DEBIAN / TRAIN[0]).exists(),
                    reason=f"no {DEBIAN}: apt-get install dataset-fashion-mnist")
def test_the_debian_package_files():
    for files, n in ((TRAIN, 60000), (TEST, 10000)):
        images, labels = read_idx_split(DEBIAN, files, "Fashion-MNIST", "")
        assert images.shape == (n, 1, 28, 28) and images.dtype == np.uint8
        assert images.min() == 0 and images.max() == 255
        assert np.bincount(labels, minlength=10).tolist() == [n // 10] * 10  # balanced
    ds = load_dataset("fashion_mnist", 2000, 500, seed=0)  # the default path is the package's
    assert ds.x_train.shape == (2000, 1, 28, 28) and ds.x_heldout.shape == (500, 1, 28, 28)
    assert ds.x_train.min() == 0 and ds.x_train.max() == 1
    assert set(np.unique(ds.y_train)) == set(range(10))


def _params_file(tmp_path: Path, params: dict, options: dict) -> Path:
    params["data"] = {**params["data"], "name": "fashion_mnist", "options": options,
                      "augment": {"crop_scale": [0.5, 1.0]}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_a_params_file_naming_fashion_mnist_resolves(tmp_path, tiny_params):
    cell = expand(load(_params_file(tmp_path, tiny_params, {})))[0]
    assert cell.data.name == "fashion_mnist"
    assert cell.data.options == {"path": "/usr/share/datasets/fashion-mnist",
                                 "split": "train_test"}
    assert cell.data.augment["crop_scale"] == [0.5, 1.0] and cell.data.augment["hflip"] is False
    tiny_params["grid"]["loss"] = ["supcon"]  # needs labels: fashion_mnist has them
    cell = expand(load(_params_file(tmp_path, tiny_params, {"split": "test"})))[0]
    assert cell.data.options["split"] == "test" and cell.loss == "supcon"
    with pytest.raises(ConfigError, match=r"data.options.split = 'val'.*'train_test'.*'test'"):
        load(_params_file(tmp_path, tiny_params, {"split": "val"}))
