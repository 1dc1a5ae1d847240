"""Training one cell: deterministic under its seed, files written, failures recorded."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.runtime import storage, store
from pipeline.runtime.cells import BACKBONE_FILE, backbone_snapshot_name, run_cell
from pipeline.train import backbone_views, embed_heldout, initial_encoder, train_cell


@pytest.fixture
def cells(tiny_params):
    return expand(from_mapping(tiny_params))


@pytest.fixture
def dataset():
    return load_dataset("laplace", 600, 200, 0, {"input_dim": 16})


def test_training_is_deterministic_and_lowers_the_loss(cells, dataset):
    a = train_cell(cells[0], dataset)
    b = train_cell(cells[0], dataset)
    for (ka, va), (kb, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert [h.loss for h in a.history] == [h.loss for h in b.history]
    assert len(a.train_indices) == cells[0].n


def test_cells_differing_in_k_share_initial_weights(cells):
    w0 = initial_encoder(cells[0], (16,)).weight
    w1 = initial_encoder(cells[1], (16,)).weight
    assert cells[0].k != cells[1].k and torch.equal(w0, w1)


def test_in_batch_negatives_train(tiny_params, dataset):
    tiny_params["train"]["negatives"] = "in_batch"
    cell = expand(from_mapping(tiny_params))[0]
    result = train_cell(cell, dataset)
    assert np.isfinite([h.loss for h in result.history]).all()


def test_run_cell_writes_the_contract(cells, dataset, tmp_path):
    meta = {"git_sha": "abc", "dataset_hash": dataset.content_hash(), "code_version": "0"}
    folder = tmp_path / cells[0].cell_id / "v1"
    outcome = run_cell(cells[0], dataset, folder, meta, snapshot_epochs=[0])
    assert outcome.status == "ok", outcome.reason
    assert {p.name for p in folder.iterdir()} == {*storage.CELL_FILES, "embeddings_e0000.parquet"}
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no staging left
    assert store.inspect(folder, [0]).status == "done"
    assert store.inspect(folder, [0, 1]).status == "todo"  # a missing snapshot: redo
    record = storage.read_json(folder / "cell.json")
    assert record["status"] == "ok" and record["config"] == cells[0].config()
    assert set(record["files"]) == {*storage.CELL_FILES, "embeddings_e0000.parquet"} - {"cell.json"}
    assert record["finished_at"] - record["started_at"] == pytest.approx(record["wall_seconds"],
                                                                         abs=0.01)
    z0 = storage.read_embeddings(folder / "embeddings.parquet", 0)
    assert z0.shape == (200, 8) and z0.dtype == np.float32
    meta_read = storage.read_metadata(folder / "embeddings.parquet")
    assert meta_read["cell_id"] == cells[0].cell_id and meta_read["dataset_hash"] == dataset.content_hash()
    history = pd.read_parquet(folder / "history.parquet")
    assert list(history.epoch) == [1, 2]
    # the saved weights reproduce the saved embeddings
    model = initial_encoder(cells[0], (16,))
    model.load_state_dict(load_file(folder / "model.safetensors"))
    # equal bit for bit: the same weights, kernels and thread count (run_cell uses 1 thread)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        again, _ = embed_heldout(model, dataset, cells[0])
        np.testing.assert_array_equal(again, z0)
        # the epoch-0 snapshot is the untrained encoder: the control shares the initial weights
        control = storage.read_embeddings(folder / "embeddings_e0000.parquet", 0)
        np.testing.assert_array_equal(control, embed_heldout(initial_encoder(cells[0], (16,)),
                                                             dataset, cells[0])[0])
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads  # run_cell restored it


def test_diverging_cell_is_recorded_not_raised(tiny_params, dataset, tmp_path):
    tiny_params["train"]["lr"] = 1e30
    tiny_params["train"]["epochs"] = 5
    cell = expand(from_mapping(tiny_params))[0]
    bad = dataset.x_train.copy()
    bad[:] = np.nan
    outcome = run_cell(cell, type(dataset)("laplace", bad, dataset.x_heldout), tmp_path / "c", {})
    assert outcome.status == "failed" and "diverged" in outcome.reason
    assert store.inspect(tmp_path / "c").status == "failed"
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["cell.json"]  # only the record


def test_supervised_objective_trains_the_same_encoder(tiny_params):
    tiny_params["data"]["name"] = "gaussian_mixture"
    tiny_params["data"]["augment"] = {}
    tiny_params["grid"]["objective"] = ["supervised"]
    (cell,) = expand(from_mapping(tiny_params))
    ds = load_dataset("gaussian_mixture", 600, 200, 0, {"input_dim": 16})
    result = train_cell(cell, ds, [0])
    losses = [h.loss for h in result.history]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert set(result.snapshots) == {0}


@pytest.mark.parametrize("schedule", ["linear", "cosine", "log_anneal", "learnable"])
def test_temperature_schedules_train(tiny_params, dataset, schedule):
    tiny_params["grid"]["tau_schedule"] = [schedule]
    (cell, _) = expand(from_mapping(tiny_params))
    result = train_cell(cell, dataset)
    assert np.isfinite([h.loss for h in result.history]).all()
    assert all(h.tau_mean > 0 for h in result.history)


def test_synco_with_a_moco_queue_trains(tiny_params, dataset):
    tiny_params["grid"]["loss"] = ["synco"]
    tiny_params["loss_options"] = {"synco": {"queue_size": 256, "hardest": 64, "momentum": 0.99}}
    (cell, _) = expand(from_mapping(tiny_params))
    result = train_cell(cell, dataset)
    assert np.isfinite([h.loss for h in result.history]).all()


def test_backbone_views_beside_the_head_and_written_with_checksums(tiny_params, dataset, tmp_path):
    # an MLP has a backbone (its hidden layers) and a head (its last Linear): one forward pass
    # gives both, the head's views are the encoder's output, and the cell writes both layers
    tiny_params["grid"]["arch"] = ["mlp"]
    tiny_params["arch_options"] = {"mlp": {"hidden": [24]}}
    cell = expand(from_mapping(tiny_params))[0]
    model = initial_encoder(cell, (16,))
    views = embed_heldout(model, dataset, cell)
    backbone = backbone_views(views)
    assert backbone is not None and backbone[0].shape == (200, 24) and views[0].shape == (200, 8)
    with torch.no_grad():
        x = torch.from_numpy(dataset.x_heldout)
        # same operations in the same order as model(x); a tolerance all the same (STYLE §15)
        np.testing.assert_allclose(views[0], model(x).numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(views[1], model[-1](torch.from_numpy(backbone[1])).numpy(),
                                   rtol=0, atol=1e-6)
    folder = tmp_path / cell.cell_id / "v1"
    outcome = run_cell(cell, dataset, folder, {"git_sha": "abc"}, snapshot_epochs=[0])
    assert outcome.status == "ok", outcome.reason
    layers = {BACKBONE_FILE, backbone_snapshot_name(0)}
    assert layers == {"backbone.parquet", "backbone_e0000.parquet"}
    record = storage.read_json(folder / "cell.json")
    assert layers <= set(record["files"])
    for name in layers:
        assert record["files"][name]["sha256"] == storage.file_sha256(folder / name)
    assert storage.read_embeddings(folder / BACKBONE_FILE, 1).shape == (200, 24)
    meta = storage.read_metadata(folder / backbone_snapshot_name(0))
    assert meta["epoch"] == "0" and meta["cell_id"] == cell.cell_id
    # the epoch-0 backbone is the untrained encoder's, as for the head
    np.testing.assert_allclose(storage.read_embeddings(folder / backbone_snapshot_name(0), 0),
                               backbone[0], rtol=0, atol=1e-6)


def test_an_encoder_without_a_head_writes_no_backbone(cells, dataset, tmp_path):
    assert cells[0].arch == "linear"
    assert backbone_views(embed_heldout(initial_encoder(cells[0], (16,)), dataset, cells[0])) is None
    folder = tmp_path / "c" / "v1"
    assert run_cell(cells[0], dataset, folder, {}, snapshot_epochs=[0]).status == "ok"
    assert not [p.name for p in folder.iterdir() if p.name.startswith("backbone")]


def test_dead_backbone_units_are_left_out_with_their_indices(tmp_path):
    from pipeline.runtime.cells import _write_views
    from pipeline.train import HeldoutViews

    rng = np.random.default_rng(0)
    head = (rng.normal(size=(50, 4)).astype(np.float32),) * 2
    h0 = np.maximum(rng.normal(size=(50, 6)), 0).astype(np.float32)
    h0[:, [1, 4]] = 0  # units no clean image switches on
    h1 = h0.copy()
    h1[3, 1] = 0.5  # ... though one augmented view does: left out of both views all the same
    storage_dir = storage.location(tmp_path)
    _write_views(storage_dir, HeldoutViews(head, (h0, h1)), None, {"epoch": "3"}, "e.parquet",
                 "b.parquet")
    np.testing.assert_array_equal(storage.read_embeddings(tmp_path / "b.parquet", 0),
                                  h0[:, [0, 2, 3, 5]])
    np.testing.assert_array_equal(storage.read_embeddings(tmp_path / "b.parquet", 1),
                                  h1[:, [0, 2, 3, 5]])
    meta = storage.read_metadata(tmp_path / "b.parquet")
    assert meta["dead_units"] == "[1, 4]" and meta["width"] == "6" and meta["epoch"] == "3"
    # the norms of the clean views are the backbone's own: the dropped coordinates are zeros
    np.testing.assert_allclose(np.linalg.norm(storage.read_embeddings(tmp_path / "b.parquet", 0),
                                              axis=1), np.linalg.norm(h0, axis=1), rtol=1e-6)
    np.testing.assert_array_equal(storage.read_embeddings(tmp_path / "e.parquet", 0), head[0])
    _write_views(storage_dir, HeldoutViews(head, (h0 * 0, h1)), None, {}, "e.parquet", "b.parquet")
    assert storage.read_embeddings(tmp_path / "b.parquet", 0).shape == (50, 6)  # all dead: kept
