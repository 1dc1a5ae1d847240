"""load_encoders: the saved weights come back into the cell's architecture, and the initial
encoder is rebuilt exactly from its seed."""

from __future__ import annotations

import torch
from safetensors.torch import save_file

from pipeline.config import expand, from_mapping
from pipeline.datasets import load_dataset
from pipeline.runtime.cells.evaluate import load_encoders
from pipeline.train import initial_encoder, train_cell


def test_load_encoders_returns_the_saved_and_the_initial_weights(tmp_path, tiny_params):
    cell = expand(from_mapping(tiny_params))[0]
    dataset = load_dataset("laplace", 600, 200, 0, {"input_dim": 16})
    trained = train_cell(cell, dataset).model
    save_file({k: v.contiguous() for k, v in trained.state_dict().items()},
              str(tmp_path / "model.safetensors"))
    got = load_encoders(cell, dataset, str(tmp_path))  # a folder given as a string, like a URI
    assert set(got) == {"trained", "initial"}
    assert not got["trained"].training and not got["initial"].training
    for name, want in (("trained", trained), ("initial", initial_encoder(cell, (16,)))):
        state = got[name].state_dict()
        assert state.keys() == want.state_dict().keys()
        for key, value in want.state_dict().items():
            assert torch.equal(state[key], value), (name, key)
    assert not torch.equal(got["trained"].weight, got["initial"].weight)  # training moved them
