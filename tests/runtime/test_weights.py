"""Frozen pretrained towers are stored once: a cell keeps what it trained and the tower's hash."""

from __future__ import annotations

import pytest
import torch

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.encoders.features import split_encoder
from pipeline.runtime.cells.evaluate import load_encoders
from pipeline.runtime.cells.one_cell import run_cell
from pipeline.runtime.store import files
from pipeline.train import initial_encoder

timm = pytest.importorskip("timm")
pytestmark = pytest.mark.slow


@pytest.fixture
def frozen_cell(tiny_params, tmp_path):
    """A DINO-style cell: timm's ViT-Tiny (5.5 M parameters, random) frozen, a linear head."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0,
                                img_size=32)
    torch.save(vit.state_dict(), tmp_path / "vit.pt")
    tiny_params["data"].update(name="digits", n_train=400, n_heldout=100, options={}, augment={})
    tiny_params["grid"].update(arch=["dino"], embed_dim=[8], n=[128], k=[4])
    tiny_params["arch_options"] = {"dino": {"model": "vit_tiny_patch16_224",
                                            "weights": str(tmp_path / "vit.pt"), "head": "linear",
                                            "model_kwargs": {"img_size": 32}}}
    tiny_params["train"]["epochs"] = 1
    (cell,) = expand(from_mapping(tiny_params))
    return cell, load_dataset("digits", 400, 100, 0), tmp_path


def test_the_cell_keeps_its_head_and_reloads_exactly(frozen_cell):
    cell, dataset, tmp_path = frozen_cell
    folder = tmp_path / "cells" / cell.cell_id / "v"
    outcome = run_cell(cell, dataset, folder, {"dataset_hash": dataset.content_hash()},
                       snapshot_epochs=[0])
    assert outcome.status == "ok", outcome.reason
    tower = (tmp_path / "vit.pt").stat().st_size
    cell_bytes = sum(p.stat().st_size for p in folder.iterdir())
    assert cell_bytes <= 0.01 * tower, (cell_bytes, tower)  # at most 1% of the tower
    # the frozen tower's features are the same in every cell: no backbone files for them
    split = split_encoder("dino", load_encoders(cell, dataset, folder)["trained"])
    assert split.backbone is not None and not split.backbone_trains
    assert not [p.name for p in folder.iterdir() if p.name.startswith("backbone")]
    stored = files.read_bytes(folder / "model.safetensors")
    from pipeline.runtime.store.weights import metadata

    assert metadata(stored)["frozen"] == '["backbone."]'
    trained = load_encoders(cell, dataset, folder)["trained"]
    x = torch.from_numpy(dataset.x_heldout[:8])
    z = files.read_embeddings(folder / "embeddings.parquet", 0)[:8]
    with torch.no_grad():
        torch.testing.assert_close(trained(x), torch.from_numpy(z.copy()), atol=1e-5, rtol=1e-5)
        assert not torch.equal(trained.head.weight,
                               initial_encoder(cell, dataset.input_shape).head.weight)


def test_other_weights_under_the_same_name_are_refused(frozen_cell):
    cell, dataset, tmp_path = frozen_cell
    folder = tmp_path / "cells" / cell.cell_id / "v"
    assert run_cell(cell, dataset, folder, {}).status == "ok"
    state = torch.load(tmp_path / "vit.pt")
    state["cls_token"] = state["cls_token"] + 1.0
    torch.save(state, tmp_path / "vit.pt")
    with pytest.raises(ValueError, match=r"arch_options.dino.weights = .*the pretrained weights "
                                         r"changed"):
        load_encoders(cell, dataset, folder)


def test_unfrozen_encoders_keep_every_tensor(tiny_params, tmp_path):
    tiny_params["grid"].update(arch=["mlp"], k=[4])
    (cell,) = expand(from_mapping(tiny_params))
    dataset = load_dataset("laplace", 600, 200, 0, {"input_dim": 16})
    folder = tmp_path / "c"
    assert run_cell(cell, dataset, folder, {}).status == "ok"
    from safetensors.torch import load

    saved = load(files.read_bytes(folder / "model.safetensors"))
    assert set(saved) == set(initial_encoder(cell, (16,)).state_dict())
