"""The dataset registry: options, determinism, hashes, shapes and labels."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config.entries import validate_options
from pipeline.datasets import (
    DATASETS,
    laplace_dataset,
    load_dataset,
    resolve_augment_options,
    resolve_dataset_options,
)

GENERATED = {"laplace": {"input_dim": 5}, "gaussian_mixture": {"input_dim": 5},
             "sparse_binary": {"input_dim": 5}, "gaussian_channel": {"input_dim": 5}, "digits": {}}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_option_has_a_default_and_a_check(name):
    spec = DATASETS[name]
    assert validate_options(spec.options, None, "data.options", name) == spec.defaults
    assert resolve_dataset_options(name, None) == spec.defaults
    augment = validate_options(spec.augment_options, {}, "data.augment", name,
                               spec.augment_defaults)
    assert resolve_augment_options(name, {}) == augment
    assert set(spec.augment_defaults) <= set(augment)
    assert spec.kind in ("vector", "image") and spec.labels in ("none", "class", "continuous")


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_same_seed_same_data_and_hash(name):
    a = load_dataset(name, 60, 20, seed=3, options=GENERATED[name])
    b = load_dataset(name, 60, 20, seed=3, options=GENERATED[name])
    c = load_dataset(name, 60, 20, seed=4, options=GENERATED[name])
    assert np.array_equal(a.x_train, b.x_train) and a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()
    assert a.x_train.dtype == np.float32 and a.x_train.shape[0] == 60
    assert a.x_heldout.shape[0] == 20 and a.input_shape == a.x_heldout.shape[1:]
    has_labels = DATASETS[name].labels != "none"
    assert (a.y_train is not None) == has_labels and (a.y_heldout is not None) == has_labels


def test_laplace_entry_is_the_existing_generator():
    a = load_dataset("laplace", 30, 10, seed=7, options={"input_dim": 4})
    b = laplace_dataset(4, 30, 10, seed=7)
    assert a.content_hash() == b.content_hash()


def test_gaussian_mixture_labels_and_spread():
    opts = {"input_dim": 3, "components": 25, "mean_std": 10.0, "component_std": 0.1}
    ds = load_dataset("gaussian_mixture", 5000, 100, seed=0, options=opts)
    assert ds.n_classes == 25 and ds.y_train.dtype == np.int64
    assert set(np.unique(ds.y_train)) == set(range(25))
    for k in range(25):  # within a component the spread is component_std
        rows = ds.x_train[ds.y_train == k]
        assert rows.std(axis=0, ddof=1).mean() == pytest.approx(0.1, rel=0.25)


def test_digits_images():
    ds = load_dataset("digits", 1000, 797, seed=0)
    assert ds.x_train.shape == (1000, 1, 8, 8) and ds.input_shape == (1, 8, 8)
    assert 0 <= ds.x_train.min() and ds.x_train.max() == 1.0
    assert ds.n_classes == 10 and set(np.unique(ds.y_heldout)) == set(range(10))
    with pytest.raises(ValueError,
                       match=r"data.n_train \+ data.n_heldout = 1000 \+ 800: digits has 1797"):
        load_dataset("digits", 1000, 800, seed=0)


def test_option_errors_name_key_value_and_allowed():
    def check(name, given, where="data.options"):
        validate_options(DATASETS[name].options, given, where, f"dataset {name!r}")

    with pytest.raises(ValueError,
                       match=r"data.options.density = 1.5: input should be less than 1"):
        check("sparse_binary", {"density": 1.5})
    with pytest.raises(ValueError, match=r"cfg.data.input_dim = 0: input should be greater than 0"):
        check("laplace", {"input_dim": 0}, "cfg.data")
    with pytest.raises(ValueError, match=r"data.options.colour = 'red': unknown option for "
                                         r"dataset 'mnist'; allowed: \['path'\]"):
        check("mnist", {"colour": "red"})
    with pytest.raises(ValueError, match=r"data.options.colour = 'red': unknown option; allowed"):
        resolve_dataset_options("mnist", {"colour": "red"})
    with pytest.raises(ValueError, match=r"data.name = 'imagenet': unknown dataset; allowed: \["):
        resolve_dataset_options("imagenet", {})
    with pytest.raises(ValueError, match=r"data.n_train = 0: must be an integer > 0"):
        load_dataset("laplace", 0, 10, seed=0)
