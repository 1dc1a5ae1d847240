"""CLIP / DINO towers loaded from local weights through the real open_clip and timm code.

Each test builds a small random model of the family, saves its weights to tmp_path, loads them
through ``make_encoder`` and compares with the model's own forward.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from pipeline.encoders import count_parameters, make_encoder
from tests.fixtures.tiny_towers import TINY_CLIP, TINY_VIT

open_clip = pytest.importorskip("open_clip")
timm = pytest.importorskip("timm")
pytestmark = pytest.mark.slow  # importing open_clip and timm alone takes seconds


@pytest.fixture
def clip_files(tmp_path):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = open_clip.CLIP(**TINY_CLIP).eval()
    (tmp_path / "tiny_clip.json").write_text(json.dumps(TINY_CLIP))
    torch.save(model.state_dict(), tmp_path / "clip.pt")
    return model, tmp_path


@pytest.fixture
def vit_files(tmp_path):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0,
                                  **TINY_VIT).eval()
    torch.save(model.state_dict(), tmp_path / "vit.pt")
    return model, tmp_path


def _images(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(1))


def test_clip_tower_equals_encode_image(clip_files):
    model, root = clip_files
    opts = {"model": str(root / "tiny_clip.json"), "weights": str(root / "clip.pt"),
            "head": "none", "normalize": False}
    enc = make_encoder("clip", (3, 32, 32), 16, opts).eval()
    x = _images(4, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(enc(x), model.encode_image(x), atol=1e-5, rtol=0)
        normed = make_encoder("clip", (3, 32, 32), 16, {**opts, "normalize": True}).eval()
        mean = torch.tensor(open_clip.OPENAI_DATASET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(open_clip.OPENAI_DATASET_STD).view(1, 3, 1, 1)
        torch.testing.assert_close(normed(x), model.encode_image((x - mean) / std), atol=1e-5,
                                   rtol=0)


def test_clip_training_checkpoint_format_and_grey_inputs(clip_files):
    model, root = clip_files
    state = {f"module.{k}": v for k, v in model.state_dict().items()}
    torch.save({"epoch": 3, "name": "run", "state_dict": state}, root / "epoch_3.pt")
    opts = {"model": str(root / "tiny_clip.json"), "weights": str(root / "epoch_3.pt"),
            "head": "none", "normalize": False}
    enc = make_encoder("clip", (1, 16, 16), 16, opts).eval()
    x = _images(2, 1, 16, 16)
    expected = model.encode_image(F.interpolate(x.expand(-1, 3, -1, -1), size=(32, 32),
                                                mode="bilinear", align_corners=False))
    with torch.no_grad():
        torch.testing.assert_close(enc(x), expected, atol=1e-5, rtol=0)


def test_dino_vit_equals_timm_pooled_features(vit_files):
    model, root = vit_files
    opts = {"model": "vit_tiny_patch16_224", "weights": str(root / "vit.pt"), "head": "none",
            "normalize": False, "model_kwargs": TINY_VIT}
    enc = make_encoder("dino", (3, 32, 32), 192, opts).eval()
    x = _images(3, 3, 32, 32)
    with torch.no_grad():
        pooled = model.forward_head(model.forward_features(x), pre_logits=True)
        torch.testing.assert_close(enc(x), pooled, atol=1e-5, rtol=0)
        torch.testing.assert_close(enc(x), model(x), atol=1e-5, rtol=0)


def test_dino_hub_teacher_checkpoint_with_head_keys(vit_files):
    model, root = vit_files
    state = {f"backbone.{k}": v for k, v in model.state_dict().items()}
    state["head.mlp.0.weight"] = torch.zeros(4, 192)  # DINO's projection head: ignored
    torch.save({"teacher": state, "epoch": 100}, root / "checkpoint.pth")
    opts = {"model": "vit_tiny_patch16_224", "weights": str(root / "checkpoint.pth"),
            "head": "none", "normalize": True, "model_kwargs": TINY_VIT}
    enc = make_encoder("dino", (3, 32, 32), 192, opts).eval()
    x = _images(2, 3, 32, 32)
    cfg = timm.data.resolve_model_data_config(model)  # the tag's own mean/std
    mean, std = (torch.tensor(cfg[k]).view(1, 3, 1, 1) for k in ("mean", "std"))
    with torch.no_grad():
        torch.testing.assert_close(enc(x), model((x - mean) / std), atol=1e-5, rtol=0)


def test_frozen_backbone_with_linear_head(vit_files):
    _, root = vit_files
    opts = {"model": "vit_tiny_patch16_224", "weights": str(root / "vit.pt"), "head": "linear",
            "model_kwargs": TINY_VIT}
    enc = make_encoder("dino", (1, 28, 28), 8, opts)
    enc.train()
    assert not enc.backbone.training and enc.head.training
    assert count_parameters(enc) == 192 * 8
    out = enc(_images(2, 1, 28, 28))
    assert out.shape == (2, 8)
    out.sum().backward()
    assert enc.head.weight.grad is not None
    assert all(p.grad is None for p in enc.backbone.parameters())


def test_missing_and_mismatched_weights(clip_files, vit_files):
    _, root = clip_files
    missing = root / "absent.pt"
    with pytest.raises(FileNotFoundError,
                       match=rf"{missing}.*open_clip.create_model_and_transforms"):
        make_encoder("clip", (3, 32, 32), 16, {"model": str(root / "tiny_clip.json"),
                                               "weights": str(missing)})
    with pytest.raises(FileNotFoundError, match=rf"{missing}.*timm.create_model"):
        make_encoder("dino", (3, 32, 32), 16, {"weights": str(missing)})
    with pytest.raises(ValueError, match=r"does not match timm 'vit_tiny_patch16_224'"):
        make_encoder("dino", (3, 32, 32), 192, {"model": "vit_tiny_patch16_224",
                                                "weights": str(root / "clip.pt"),
                                                "model_kwargs": TINY_VIT})
    with pytest.raises(ValueError, match=r"embed_dim = 8: dino with head 'none' outputs .* 192"):
        make_encoder("dino", (3, 32, 32), 8, {"model": "vit_tiny_patch16_224", "head": "none",
                                              "weights": str(root / "vit.pt"),
                                              "model_kwargs": TINY_VIT})
    with pytest.raises(ValueError, match=r"model = 'no-such-vit': not a timm model"):
        make_encoder("dino", (3, 32, 32), 8, {"model": "no-such-vit", "weights": "x.pt"})


def test_safetensors_weights_and_position_embedding_resampling(vit_files):
    from safetensors.torch import save_file

    model, root = vit_files
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, root / "vit.safetensors")
    opts = {"model": "vit_tiny_patch16_224", "weights": str(root / "vit.safetensors"),
            "head": "none", "normalize": False, "model_kwargs": TINY_VIT}
    x = _images(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(make_encoder("dino", (3, 32, 32), 192, opts).eval()(x),
                                   model(x), atol=1e-5, rtol=0)
        # a 48-pixel model from 32-pixel weights: timm resamples the position grid 2×2 → 3×3
        bigger = make_encoder("dino", (3, 48, 48), 192,
                              {**opts, "model_kwargs": {**TINY_VIT, "img_size": 48}}).eval()
        assert bigger.backbone.pos_embed.shape == (1, 10, 192)
        assert bigger(_images(2, 3, 48, 48)).shape == (2, 192)
