"""Pretrained image towers from local weights: CLIP via open_clip, DINO/ViT via timm.

Nothing is downloaded: the architecture is built with random weights (``pretrained=False``) and
the state dict is read from the ``weights`` file (``.safetensors`` or a ``torch.save`` file: a
plain state dict, an open_clip training checkpoint ``{"state_dict": ...}``, or a DINO checkpoint
``{"teacher": ...}``; ``module.`` / ``backbone.`` prefixes are stripped). Keys must match exactly.

Inputs ``(B, C, H, W)`` in [0, 1] pass through :class:`ImageAdapter`: one channel is repeated to
three, the image is resized (bilinear) to the tower's input size and normalised with the
family's mean/std (``normalize``). The result is :class:`PretrainedEncoder`:
``head: linear`` adds a trainable linear projection width → embed_dim (no bias);
``head: none`` returns the tower's features, and embed_dim must equal the tower's width.
With ``freeze`` (default) the tower has no trainable parameters and stays in eval mode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline.datasets.images import resolve_path

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class ImageAdapter(nn.Module):
    """``(B, C, H, W)`` in [0, 1] → ``(B, channels, *size)``: repeat grey, resize, normalise."""

    def __init__(self, channels: int, size: tuple[int, int], mean: Sequence[float],
                 std: Sequence[float], normalize: bool):
        super().__init__()
        self.channels, self.size, self.normalize = channels, tuple(size), normalize
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[1] == 1 and self.channels != 1:
            x = x.expand(-1, self.channels, -1, -1)
        if tuple(x.shape[-2:]) != self.size:
            x = F.interpolate(x, size=self.size, mode="bilinear", align_corners=False)
        mean, std = self.get_buffer("mean"), self.get_buffer("std")
        return (x - mean) / std if self.normalize else x


class PretrainedEncoder(nn.Module):
    """adapter → backbone → head; a frozen backbone runs without autograd and stays in eval."""

    def __init__(self, adapter: ImageAdapter, backbone: nn.Module, head: nn.Module, freeze: bool):
        super().__init__()
        self.adapter, self.backbone, self.head, self.freeze = adapter, backbone, head, freeze
        if freeze:
            self.backbone.requires_grad_(False)
            self.backbone.eval()

    def train(self, mode: bool = True) -> PretrainedEncoder:
        super().train(mode)
        if self.freeze:
            self.backbone.eval()
        return self

    def forward(self, x: Tensor) -> Tensor:
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze):
            features = self.backbone(self.adapter(x))
        return self.head(features)


def read_state_dict(path: Path, howto: str) -> dict[str, Tensor]:
    """Tensors of a local weights file, unwrapped and with wrapper prefixes stripped."""
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found at {path}: {howto}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        obj: Any = load_file(str(path))
    else:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # TorchScript archives, pickled modules, corrupt files
            raise ValueError(f"weights = {str(path)!r}: not a plain state dict ({err}); "
                             f"{howto}") from err
    for key in ("state_dict", "model", "teacher"):
        if isinstance(obj, Mapping) and isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    out = {}
    for name, value in obj.items():
        for prefix in ("module.", "backbone."):
            name = name.removeprefix(prefix)
        out[name] = value
    return out


def _load_exact(module: nn.Module, state: Mapping[str, Tensor], path: Path, what: str) -> None:
    """Load every tensor; any missing, unexpected or mis-shaped key is a ``ValueError``."""
    problem = ""
    try:
        result = module.load_state_dict(dict(state), strict=False)
        if result.missing_keys or result.unexpected_keys:
            problem = (f"missing {result.missing_keys[:5]}, "
                       f"unexpected {result.unexpected_keys[:5]}")
    except RuntimeError as err:  # shape mismatches
        problem = " ".join(str(err).split())[:400]
    if problem:
        raise ValueError(f"weights = {str(path)!r}: does not match {what}; {problem}")


def _head(width: int, embed_dim: int, head: str, arch: str) -> nn.Module:
    if head == "linear":
        return nn.Linear(width, embed_dim, bias=False)
    if embed_dim != width:
        raise ValueError(f"embed_dim = {embed_dim}: {arch} with head 'none' outputs the tower's "
                         f"{width} features; set embed_dim to {width} or use head 'linear'")
    return nn.Identity()


def _image_channels(input_shape: tuple[int, ...], channels: int, arch: str) -> None:
    if len(input_shape) != 3 or input_shape[0] not in (1, channels):
        raise ValueError(f"input_shape = {tuple(input_shape)}: {arch} takes images (C, H, W) "
                         f"with C = 1 or {channels}")


CLIP_HOWTO = (
    "on a machine with internet run `model, _, _ = open_clip.create_model_and_transforms("
    "'<model>', pretrained='<tag>')` then `torch.save(model.state_dict(), path)` and copy "
    "the file here (for OpenAI weights also set quick_gelu: true)")
DINO_HOWTO = ("on a machine with internet run `m = timm.create_model('<model>', pretrained=True, "
              "num_classes=0)` then `torch.save(m.state_dict(), path)`, or save the state dict of "
              "torch.hub.load('facebookresearch/dino:main', 'dino_vits16'), and copy the file here")


def clip_model_config(model: str) -> dict[str, Any]:
    """An open_clip model config: a built-in name (``open_clip.list_models()``) or a local .json
    (either the config itself or an open_clip ``open_clip_config.json`` with a ``model_cfg``
    key)."""
    import open_clip

    if model.endswith(".json"):
        path = resolve_path(model)
        if not path.is_file():
            raise FileNotFoundError(f"open_clip model config not found at {path}")
        cfg = json.loads(path.read_text())
        return dict(cfg.get("model_cfg", cfg))
    cfg = open_clip.get_model_config(model)
    if cfg is None:
        raise ValueError(f"model = {model!r}: not an open_clip model config; allowed: a name from "
                         "open_clip.list_models() or a local .json file")
    return dict(cfg)


def clip_encoder(input_shape: tuple[int, ...], embed_dim: int, model: str, weights: str,
                 head: str = "linear", freeze: bool = True, normalize: bool = True,
                 quick_gelu: bool = False) -> nn.Module:
    """An open_clip image tower (``CLIP.visual``, i.e. ``encode_image`` without normalisation)."""
    from open_clip import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD
    from open_clip.model import _build_vision_tower  # builds the image tower alone, no text

    _image_channels(input_shape, 3, "clip")
    cfg = clip_model_config(model)
    vision_cfg = dict(cfg["vision_cfg"])
    if "timm_model_name" in vision_cfg:
        vision_cfg["timm_model_pretrained"] = False  # never let timm fetch weights
    gelu = quick_gelu or bool(cfg.get("quick_gelu", False))
    visual = _build_vision_tower(cfg["embed_dim"], vision_cfg, gelu)
    path = resolve_path(weights)
    state = read_state_dict(path, CLIP_HOWTO.replace("<model>", model))
    if any(k.startswith("visual.") for k in state):  # a whole CLIP: keep the image tower
        state = {k.removeprefix("visual."): v for k, v in state.items() if k.startswith("visual.")}
    _load_exact(visual, state, path, f"open_clip {model!r} image tower")
    size = vision_cfg.get("image_size", 224)
    size = (size, size) if isinstance(size, int) else tuple(size)
    pre = cfg.get("preprocess_cfg", {})
    adapter = ImageAdapter(3, size, pre.get("mean", OPENAI_DATASET_MEAN),
                           pre.get("std", OPENAI_DATASET_STD), normalize)
    width = int(getattr(visual, "output_dim", cfg["embed_dim"]))
    return PretrainedEncoder(adapter, visual, _head(width, embed_dim, head, "clip"), freeze)


def _timm_input(model: nn.Module) -> tuple[int, tuple[int, int], Sequence[float], Sequence[float]]:
    """(channels, (H, W), mean, std) the timm model expects; the patch embedding wins when set."""
    import timm

    cfg = timm.data.resolve_model_data_config(model)
    channels, size = cfg["input_size"][0], tuple(cfg["input_size"][1:])
    patch = getattr(model, "patch_embed", None)
    if patch is not None and getattr(patch, "img_size", None) is not None:
        size = tuple(patch.img_size)
        channels = patch.proj.in_channels
    return channels, size, cfg.get("mean", IMAGENET_MEAN), cfg.get("std", IMAGENET_STD)


def dino_encoder(input_shape: tuple[int, ...], embed_dim: int, model: str, weights: str,
                 head: str = "linear", freeze: bool = True, normalize: bool = True,
                 model_kwargs: Mapping[str, Any] | None = None) -> nn.Module:
    """A timm model with ``num_classes=0``: pooled pre-logits features (the CLS token for ViTs).

    ``model`` may carry a timm pretrained tag (``vit_small_patch16_224.dino``): only its metadata
    is used, for the input size and the normalisation mean/std (ImageNet's for DINO).
    """
    import timm

    if not timm.is_model(model):
        raise ValueError(f"model = {model!r}: not a timm model name; see timm.list_models()")
    tower = timm.create_model(model, pretrained=False, num_classes=0, **dict(model_kwargs or {}))
    channels, size, mean, std = _timm_input(tower)
    _image_channels(input_shape, channels, "dino")
    path = resolve_path(weights)
    state = read_state_dict(path, DINO_HOWTO.replace("<model>", model))
    state = {k: v for k, v in state.items() if not k.startswith("head.")}  # classifier, if any
    if isinstance(tower, timm.models.vision_transformer.VisionTransformer) and "pos_embed" in state:
        # resamples position embeddings when the checkpoint's grid differs from img_size
        state = timm.models.vision_transformer.checkpoint_filter_fn(state, tower)
    _load_exact(tower, state, path, f"timm {model!r}")
    width = int(getattr(tower, "head_hidden_size", None) or tower.num_features)  # type: ignore[arg-type]
    adapter = ImageAdapter(channels, size, mean, std, normalize)
    return PretrainedEncoder(adapter, tower, _head(width, embed_dim, head, "dino"), freeze)
