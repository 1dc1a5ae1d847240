"""Training one cell: deterministic under its seed, files written, failures recorded."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.encoders.features import split_encoder
from pipeline.losses import temperature_at
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.store import files, folders, layout
from pipeline.train import backbone_views, embed_heldout, initial_encoder, train_cell


@pytest.fixture
def cells(tiny_params):
    return expand(from_mapping(tiny_params))


@pytest.fixture
def dataset():
    return load_dataset("laplace", 600, 200, 0, {"input_dim": 16})


def test_training_is_deterministic(cells, dataset):
    a = train_cell(cells[0], dataset)
    b = train_cell(cells[0], dataset)
    for (ka, va), (kb, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items(),
                                  strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert [h.loss for h in a.history] == [h.loss for h in b.history]


def test_training_lowers_the_loss(tiny_params, dataset):
    tiny_params["train"].update(lr=0.02, epochs=4)
    cell = expand(from_mapping(tiny_params))[0]
    result = train_cell(cell, dataset)
    # the trained encoder's loss on the same batches and draws is lower than the untrained
    # encoder's (the first epoch's mean already includes training steps)
    untrained = _mean_batch_loss(cell, dataset, initial_encoder(cell, (16,)))
    trained = _mean_batch_loss(cell, dataset, result.model)
    assert trained < untrained - 0.1, (trained, untrained)
    losses = [h.loss for h in result.history]
    assert losses[-1] < losses[0], losses


def _mean_batch_loss(cell, dataset, model) -> float:
    """The cell's loss of ``model`` over the training batches of one epoch, without updates."""
    from pipeline.datasets import make_augmenter
    from pipeline.train import _contrastive, _State, subsample

    rows = subsample(cell, dataset.x_train.shape[0])
    x = torch.from_numpy(np.ascontiguousarray(dataset.x_train[rows]))
    aug, gen = make_augmenter(cell.data.name, cell.data.augment), torch.Generator().manual_seed(5)
    bs = cell.train.batch_size
    with torch.no_grad():
        losses = [_contrastive(cell, _State(model), aug, x, torch.arange(i, i + bs), None, gen,
                               0, cell.tau).item() for i in range(0, x.shape[0] - bs + 1, bs)]
    return float(np.mean(losses))


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
    assert {p.name for p in folder.iterdir()} == {*layout.REQUIRED, "embeddings_e0000.parquet"}
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no staging left
    assert folders.inspect(folder, [0]).status == "done"
    assert folders.inspect(folder, [0, 1]).status == "todo"  # a missing snapshot: redo
    record = files.read_json(folder / "cell.json")
    assert record["status"] == "ok" and record["config"] == cells[0].config()
    assert set(record["files"]) == {*layout.REQUIRED, "embeddings_e0000.parquet"} - {"cell.json"}
    assert record["finished_at"] - record["started_at"] == pytest.approx(record["wall_seconds"],
                                                                         abs=0.01)
    z0 = files.read_embeddings(folder / "embeddings.parquet", 0)
    assert z0.shape == (200, 8) and z0.dtype == np.float32
    meta_read = files.read_metadata(folder / "embeddings.parquet")
    assert (meta_read["cell_id"] == cells[0].cell_id
            and meta_read["dataset_hash"] == dataset.content_hash())
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
        control = files.read_embeddings(folder / "embeddings_e0000.parquet", 0)
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
    assert folders.inspect(tmp_path / "c").status == "failed"
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


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine", "log_anneal"])
def test_temperature_schedules_are_applied(tiny_params, dataset, schedule):
    """tau_mean of each epoch is the mean of the schedule's closed form over that epoch's steps
    (256 rows / batch 64 = 4 steps an epoch, 2 epochs)."""
    tiny_params["grid"]["tau_schedule"] = [schedule]
    (cell, _) = expand(from_mapping(tiny_params))
    result = train_cell(cell, dataset)
    assert np.isfinite([h.loss for h in result.history]).all()
    steps, total = 4, 8
    for h in result.history:
        epoch_steps = range((h.epoch - 1) * steps, h.epoch * steps)
        want = np.mean([temperature_at(schedule, t, total, cell.schedule_options)
                        for t in epoch_steps])
        assert h.tau_mean == pytest.approx(want, rel=1e-12), (schedule, h.epoch)
    if schedule != "constant":  # the schedule moved τ between the epochs
        assert result.history[0].tau_mean != result.history[1].tau_mean


def test_learnable_temperature_is_trained(tiny_params, dataset):
    tiny_params["grid"]["tau_schedule"] = ["learnable"]
    (cell, _) = expand(from_mapping(tiny_params))
    result = train_cell(cell, dataset)
    opts = cell.schedule_options
    taus = [h.tau_mean for h in result.history]
    assert all(opts["tau_min"] <= t <= opts["tau_max"] for t in taus)
    # the optimiser moved log(1/τ) away from its initial value
    assert abs(taus[-1] - opts["tau_init"]) > 1e-4, taus


def test_synco_with_a_moco_queue_trains(tiny_params, dataset):
    tiny_params["grid"]["loss"] = ["synco"]
    tiny_params["loss_options"] = {"synco": {"queue_size": 256, "hardest": 64, "momentum": 0.99}}
    (cell, _) = expand(from_mapping(tiny_params))
    result = train_cell(cell, dataset)
    assert np.isfinite([h.loss for h in result.history]).all()


def _xclr_cell(tiny_params, options):
    tiny_params["data"].update(name="gaussian_mixture", options={"input_dim": 16, "components": 3})
    tiny_params["grid"].update(loss=["xclr"], k=[4])
    tiny_params["loss_options"] = {"xclr": options}
    (cell,) = expand(from_mapping(tiny_params))
    return cell, load_dataset("gaussian_mixture", 600, 200, 0, {"input_dim": 16, "components": 3})


def _spy(monkeypatch):
    """Record each batch's graph and labels as the X-CLR adapter receives them."""
    from dataclasses import replace

    from pipeline.losses import LOSSES

    seen: list[tuple] = []
    spec = LOSSES["xclr"]

    def fn(batch, tau, options):
        seen.append((batch.similarity, batch.labels))
        return spec.fn(batch, tau, options)

    monkeypatch.setitem(LOSSES, "xclr", replace(spec, fn=fn))
    return seen


def test_xclr_trains_with_a_class_similarity_graph(tiny_params, monkeypatch):
    m = [[1.0, 0.6, -0.3], [0.6, 1.0, 0.0], [-0.3, 0.0, 1.0]]
    cell, ds = _xclr_cell(tiny_params, {"graph": "class_similarity", "class_similarity": m})
    seen = _spy(monkeypatch)
    result = train_cell(cell, ds)
    assert np.isfinite([h.loss for h in result.history]).all()
    assert len(seen) == 8  # every step: 4 batches × 2 epochs
    for similarity, labels in seen:  # the loss got S_ij = m[y_i][y_j] of its own batch
        want = torch.tensor(m)[labels][:, labels]
        torch.testing.assert_close(similarity, want, rtol=0, atol=0)
    other = _xclr_cell(tiny_params, {"graph": "class_similarity",
                                     "class_similarity": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0],
                                                          [0.0, 0.0, 1.0]]})[0]
    assert other.cell_id != cell.cell_id  # the graph is part of the cell's identity
    assert train_cell(other, ds).history[0].loss != result.history[0].loss  # and of its loss


def test_xclr_trains_with_the_inputs_cosine_graph(tiny_params, monkeypatch):
    cell, ds = _xclr_cell(tiny_params, {"graph": "inputs"})
    seen = _spy(monkeypatch)
    result = train_cell(cell, ds)
    assert np.isfinite([h.loss for h in result.history]).all()
    for similarity, _ in seen:
        assert similarity.shape == (64, 64)
        torch.testing.assert_close(similarity, similarity.T)
        torch.testing.assert_close(similarity.diagonal(), torch.ones(64), rtol=0, atol=1e-6)
    (labels_cell, _) = _xclr_cell(tiny_params, {"graph": "labels"})
    seen.clear()
    train_cell(labels_cell, ds)
    assert all(s is None for s, _ in seen)  # the labels graph: the class path, no (B, B) matrix


def test_backbone_views_beside_the_head_and_written_with_checksums(tiny_params, dataset, tmp_path):
    # an MLP has a backbone (its hidden layers) and a head (its last Linear): one forward pass
    # gives both, the head's views are the encoder's output, and the cell writes both layers
    tiny_params["grid"]["arch"] = ["mlp"]
    tiny_params["arch_options"] = {"mlp": {"hidden": [24]}}
    cell = expand(from_mapping(tiny_params))[0]
    model = initial_encoder(cell, (16,))
    views = embed_heldout(model, dataset, cell)
    backbone = backbone_views(views)
    assert split_encoder("mlp", model).backbone_trains  # its hidden layers train: written
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
    layers = {layout.BACKBONE, layout.backbone_snapshot(0)}
    assert layers == {"backbone.parquet", "backbone_e0000.parquet"}
    record = files.read_json(folder / "cell.json")
    assert layers <= set(record["files"])
    for name in layers:
        assert record["files"][name]["sha256"] == files.file_sha256(folder / name)
    assert files.read_embeddings(folder / layout.BACKBONE, 1).shape == (200, 24)
    meta = files.read_metadata(folder / layout.backbone_snapshot(0))
    assert meta["epoch"] == "0" and meta["cell_id"] == cell.cell_id
    # the epoch-0 backbone is the untrained encoder's, as for the head
    np.testing.assert_allclose(files.read_embeddings(folder / layout.backbone_snapshot(0), 0),
                               backbone[0], rtol=0, atol=1e-6)


def test_an_encoder_without_a_head_writes_no_backbone(cells, dataset, tmp_path):
    assert cells[0].arch == "linear"
    assert backbone_views(embed_heldout(initial_encoder(cells[0], (16,)), dataset,
                                        cells[0])) is None
    folder = tmp_path / "c" / "v1"
    assert run_cell(cells[0], dataset, folder, {}, snapshot_epochs=[0]).status == "ok"
    assert not [p.name for p in folder.iterdir() if p.name.startswith("backbone")]


def test_dead_backbone_units_are_left_out_with_their_indices(tmp_path):
    from pipeline.runtime.cells.one_cell import _write_views
    from pipeline.train import HeldoutViews

    rng = np.random.default_rng(0)
    head = (rng.normal(size=(50, 4)).astype(np.float32),) * 2
    h0 = np.maximum(rng.normal(size=(50, 6)), 0).astype(np.float32)
    h0[:, [1, 4]] = 0  # units no clean image switches on
    h1 = h0.copy()
    h1[3, 1] = 0.5  # ... though one augmented view does: left out of both views all the same
    storage_dir = files.location(tmp_path)
    _write_views(storage_dir, HeldoutViews(head, (h0, h1)), None, {"epoch": "3"}, "e.parquet",
                 "b.parquet")
    np.testing.assert_array_equal(files.read_embeddings(tmp_path / "b.parquet", 0),
                                  h0[:, [0, 2, 3, 5]])
    np.testing.assert_array_equal(files.read_embeddings(tmp_path / "b.parquet", 1),
                                  h1[:, [0, 2, 3, 5]])
    meta = files.read_metadata(tmp_path / "b.parquet")
    assert meta["dead_units"] == "[1, 4]" and meta["width"] == "6" and meta["epoch"] == "3"
    # the norms of the clean views are the backbone's own: the dropped coordinates are zeros
    np.testing.assert_allclose(np.linalg.norm(files.read_embeddings(tmp_path / "b.parquet", 0),
                                              axis=1), np.linalg.norm(h0, axis=1), rtol=1e-6)
    np.testing.assert_array_equal(files.read_embeddings(tmp_path / "e.parquet", 0), head[0])
    _write_views(storage_dir, HeldoutViews(head, (h0 * 0, h1)), None, {}, "e.parquet", "b.parquet")
    assert files.read_embeddings(tmp_path / "b.parquet", 0).shape == (50, 6)  # all dead: kept
