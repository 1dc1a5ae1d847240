"""Backbone / head split of every registered encoder: head(backbone(x)) equals model(x).

Small randomly initialised models; CLIP and DINO towers are saved to tmp_path and loaded through
``make_encoder`` as in tests/encoders/test_pretrained.py. Tolerance: the split runs the model's
own modules in the model's order, so the outputs agree to float32 rounding (atol 1e-6; no
bit-for-bit claim, STYLE §15).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from pipeline.encoders import make_encoder
from pipeline.encoders.features import BACKBONE, HEAD, embed_features, split_encoder
from pipeline.seeding import seeded_init
from tests.fixtures.tiny_towers import TINY_CLIP, TINY_VIT

ATOL = 1e-6


def _x(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(1))


def _build(arch, shape, d, options=None):
    with seeded_init(0):
        return make_encoder(arch, shape, d, options).eval()


def _check(arch, model, x, backbone_width):
    split = split_encoder(arch, model)
    with torch.no_grad():
        full = model(x)
        out = split(x)
    assert set(out) == set(split.names)
    torch.testing.assert_close(out[HEAD], full, atol=ATOL, rtol=0)
    if backbone_width is None:
        assert split.names == (HEAD,) and split.backbone is None and split.head is None
    else:
        assert split.names == (HEAD, BACKBONE)
        assert out[BACKBONE].shape == (x.shape[0], backbone_width)
        with torch.no_grad():
            torch.testing.assert_close(split.head(split.backbone(x)), full, atol=ATOL, rtol=0)
    return split


def _count_calls(module: nn.Module) -> list[int]:
    calls = [0]
    module.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


@pytest.mark.parametrize("small_stem", [True, False])
def test_resnet18_backbone_is_the_pooled_512_features(small_stem):
    model = _build("resnet18", (1, 16, 16), 8, {"small_stem": small_stem})
    split = _check("resnet18", model, _x(3, 1, 16, 16), 512)
    assert split.head is model.fc
    calls = _count_calls(model.layer4)
    with torch.no_grad():
        split(_x(3, 1, 16, 16))
    assert calls == [1]  # one pass through the backbone for both representations


@pytest.mark.parametrize("shape", [(10,), (1, 4, 4)])
def test_mlp_backbone_is_all_but_the_last_linear(shape):
    model = _build("mlp", shape, 6, {"hidden": [32, 16]})
    split = _check("mlp", model, _x(5, *shape), 16)
    assert isinstance(split.head, nn.Linear) and split.head.in_features == 16
    assert (split.backbone(_x(5, *shape)) >= 0).all()  # after the last hidden ReLU


@pytest.mark.parametrize("shape", [(10,), (1, 4, 4)])
def test_linear_and_mlp_without_hidden_layers_have_no_head(shape):
    _check("linear", _build("linear", shape, 6), _x(5, *shape), None)
    _check("mlp", _build("mlp", shape, 6, {"hidden": []}), _x(5, *shape), None)


@pytest.fixture
def clip_opts(tmp_path):
    open_clip = pytest.importorskip("open_clip")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = open_clip.CLIP(**TINY_CLIP).eval()
    (tmp_path / "tiny_clip.json").write_text(json.dumps(TINY_CLIP))
    torch.save(model.state_dict(), tmp_path / "clip.pt")
    return {"model": str(tmp_path / "tiny_clip.json"), "weights": str(tmp_path / "clip.pt")}


@pytest.fixture
def dino_opts(tmp_path):
    timm = pytest.importorskip("timm")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0,
                                  **TINY_VIT).eval()
    torch.save(model.state_dict(), tmp_path / "vit.pt")
    return {"model": "vit_tiny_patch16_224", "weights": str(tmp_path / "vit.pt"),
            "model_kwargs": TINY_VIT}


@pytest.mark.slow
def test_clip_linear_head_over_the_frozen_tower(clip_opts):
    model = _build("clip", (1, 28, 28), 8, {**clip_opts, "head": "linear"})
    split = _check("clip", model, _x(2, 1, 28, 28), 16)
    assert split.head is model.head
    with torch.no_grad():
        tower = model.backbone(model.adapter(_x(2, 1, 28, 28)))
        calls = _count_calls(model.backbone)
        out = split(_x(2, 1, 28, 28))
    assert calls == [1]
    torch.testing.assert_close(out[BACKBONE], tower, atol=ATOL, rtol=0)
    _check("clip", _build("clip", (3, 32, 32), 16, {**clip_opts, "head": "none"}),
           _x(2, 3, 32, 32), None)


@pytest.mark.slow
def test_dino_linear_head_over_the_frozen_tower(dino_opts):
    model = _build("dino", (3, 32, 32), 8, {**dino_opts, "head": "linear"})
    split = _check("dino", model, _x(2, 3, 32, 32), 192)
    model.train()  # a frozen tower stays in eval mode and out of autograd
    out = split(_x(2, 3, 32, 32))
    assert not out[BACKBONE].requires_grad and out[HEAD].requires_grad
    _check("dino", _build("dino", (3, 32, 32), 192, {**dino_opts, "head": "none"}),
           _x(2, 3, 32, 32), None)


def test_embed_features_batches_and_restores_the_mode():
    model = _build("mlp", (10,), 6, {"hidden": [32, 16]}).train()
    x = _x(23, 10).numpy()
    got = embed_features(split_encoder("mlp", model), x, batch_size=4)
    assert model.training
    with torch.no_grad():
        model.eval()
        np.testing.assert_allclose(got[HEAD], model(torch.from_numpy(x)).numpy(), rtol=0,
                                   atol=ATOL)
    assert got[BACKBONE].shape == (23, 16) and got[BACKBONE].dtype == np.float32


def test_unknown_arch_and_wrong_modules_are_errors():
    with pytest.raises(ValueError, match=r"arch = 'vit': no feature split for it; allowed: clip, "
                                         r"dino, linear, mlp, resnet18"):
        split_encoder("vit", nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"model = Linear: not a torchvision ResNet"):
        split_encoder("resnet18", nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"model = Sequential: not a mlp encoder ending in a "
                                         r"Linear layer"):
        split_encoder("mlp", nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    with pytest.raises(ValueError, match=r"model = Linear: expected the PretrainedEncoder built "
                                         r"by make_encoder\('clip', \.\.\.\)"):
        split_encoder("clip", nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"batch_size = 0: must be an integer >= 1"):
        embed_features(split_encoder("linear", nn.Linear(2, 2)), np.zeros((3, 2)), 0)
