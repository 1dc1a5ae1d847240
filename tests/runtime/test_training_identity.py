"""One training per distinct training: cells that differ only in what their training does not
read (k, ``train.negatives`` for a loss without negatives) share a training id, a store folder,
the random streams and so their embeddings; the id names the device that runs (issue 21)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.grid import concrete_device
from pipeline.losses.registry import LOSSES
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.grid_run import first_per_training, plan
from pipeline.runtime.store import files

META = {"git_sha": "test", "dataset_hash": "test", "code_version": "test"}


def _cells(tiny_params, **grid):
    tiny_params["grid"].update(grid)
    tiny_params["train"]["epochs"] = 1
    return from_mapping(tiny_params)


def test_a_loss_without_negatives_shares_one_training_across_k(tiny_params):
    params = _cells(tiny_params, loss=["nt_xent", "infonce"], k=[4, 8], seed=[0, 1])
    cells = expand(params)
    assert len(cells) == 8 and len({c.cell_id for c in cells}) == 8
    by = {(c.loss, c.k, c.seed): c for c in cells}
    for seed in (0, 1):
        a, b = by["nt_xent", 4, seed], by["nt_xent", 8, seed]
        assert a.training_id == b.training_id != a.cell_id  # one training, two cells
        assert a.training_config() == b.training_config()
        assert (a.training_config()["k"] is None
                and a.training_config()["train"]["negatives"] is None)
        i4, i8 = by["infonce", 4, seed], by["infonce", 8, seed]
        assert (i4.training_id, i8.training_id) == (i4.cell_id, i8.cell_id)  # reads k: its own
    assert by["nt_xent", 4, 0].training_id != by["nt_xent", 4, 1].training_id  # seeds differ
    assert len({c.training_id for c in cells}) == 6


def test_the_declaration_follows_what_a_loss_uses():
    for name, spec in LOSSES.items():
        assert ("k" in spec.unread) == (not spec.needs_negatives), name


def test_shared_cells_train_identically_and_are_trained_once(tiny_params, tmp_path):
    params = _cells(tiny_params, loss=["nt_xent"], k=[4, 8])
    d = params.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    k4, k8 = expand(params)
    # the training reads nothing of k: run both on their own, the embeddings are the same
    views = []
    for cell in (k4, k8):
        out = run_cell(cell, dataset, tmp_path / cell.cell_id, META)
        assert out.status == "ok", out.reason
        views.append(files.read_embeddings(tmp_path / cell.cell_id / "embeddings.parquet", 0))
        record = files.read_json(tmp_path / cell.cell_id / "cell.json")
        assert record["cell_id"] == cell.training_id and record["grid"]["k"] is None
    np.testing.assert_allclose(views[0], views[1], rtol=1e-6, atol=1e-7)
    # the plan gives them one folder, and the stage trains the first of each training only
    entries = plan([k4, k8], tmp_path / "store", "hash", [], "retrain")
    assert entries[0].folder == entries[1].folder and entries[0].key == entries[1].key
    assert first_per_training(entries) == [entries[0]]


@pytest.mark.parametrize(("device", "gpus", "runs"), [("auto", 0.0, "cpu"), ("auto", 0.25, "cuda"),
                                                      ("cpu", 1.0, "cpu"), ("cuda", 0.0, "cuda")])
def test_the_id_names_the_device_that_runs(tiny_params, device, gpus, runs):
    assert concrete_device(device, gpus > 0) == runs
    tiny_params["train"]["device"] = device
    tiny_params["compute"]["num_gpus"] = gpus
    cell = expand(from_mapping(tiny_params))[0]
    assert cell.train.device == cell.config()["train"]["device"] == runs
    tiny_params["train"]["device"] = runs  # auto and what it stands for are one cell
    assert expand(from_mapping(tiny_params))[0].cell_id == cell.cell_id


def test_deterministic_kernels_are_part_of_the_id_and_restored(tiny_params):
    import torch

    from pipeline.train import deterministic_kernels

    plain = expand(from_mapping(tiny_params))[0]
    tiny_params["train"]["deterministic"] = True
    strict = expand(from_mapping(tiny_params))[0]
    assert strict.cell_id != plain.cell_id and strict.config()["train"]["deterministic"] is True
    assert not torch.are_deterministic_algorithms_enabled()
    with deterministic_kernels(True):
        assert torch.are_deterministic_algorithms_enabled()
    assert not torch.are_deterministic_algorithms_enabled()


def test_auto_is_measured_before_the_lookup_and_named_in_the_version(tiny_params, tmp_path):
    """A cell asking for ``auto`` is looked up under the setting it was measured to, so a bf16
    result never stands in for a float32 one (and the cell id stays the one asked for)."""
    from pipeline.runtime.backends.executor import resolve_auto_modes

    tiny_params["train"].update(precision="auto", memory_format="auto")
    params = from_mapping(tiny_params)
    asked = expand(params)
    cells, measured = resolve_auto_modes(asked, (16,), params.compute, 1)
    assert [c.cell_id for c in cells] == [c.cell_id for c in asked]
    for cell in cells:
        mode = measured[cell.cell_id]
        assert cell.train.precision == mode["precision"] in ("float32", "bfloat16")
        assert cell.train.memory_format == mode["memory_format"] == "contiguous"  # vectors
    settings = [replace(cells[0], train=replace(cells[0].train, precision=p))
                for p in ("float32", "bfloat16")]
    versions = [plan([c], tmp_path, "h", [], "retrain")[0].version for c in settings]
    assert versions[0] != versions[1]
