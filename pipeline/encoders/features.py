"""The representations a frozen-feature protocol probes: the encoder's output and its backbone's.

For a built encoder (``make_encoder``) :func:`split_encoder` gives its backbone and its head as
modules that share the encoder's parameters, such that ``head(backbone(x)) == model(x)``:

| arch | backbone → features | head |
|---|---|---|
| resnet18 | stem, layer1–4, global average pool, flatten → ``(B, 8·width)`` | ``fc`` |
| mlp | (flatten,) every layer but the last Linear → ``(B, hidden[-1])`` | the last Linear |
| linear | none: the raw output is the only representation | none |
| clip, dino (``head: linear``) | image adapter + frozen tower → ``(B, width)`` | the linear head |
| clip, dino (``head: none``), mlp without hidden layers | none | none |

:class:`EncoderSplit` called on a batch returns ``{"head": (B, d)}`` (the encoder's output, what
its head gives) and, when there is a head, ``{"backbone": (B, h)}`` too, both from ONE pass
through the backbone. Modes are the caller's: call under ``model.eval()`` and
``torch.no_grad()`` for frozen features (:func:`embed_features` does both).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from pipeline.encoders.encode import ENCODE_BATCH
from pipeline.encoders.pretrained import PretrainedEncoder

HEAD = "head"  # the encoder's output, model(x)
BACKBONE = "backbone"  # the features its head reads
SPLIT_ARCHS = ("clip", "dino", "linear", "mlp", "resnet18")  # what split_encoder knows


@dataclass(frozen=True)
class EncoderSplit:
    """``backbone`` and ``head`` of an encoder, or ``None`` for both when it has no head."""

    arch: str
    backbone: nn.Module | None
    head: nn.Module | None
    model: nn.Module

    @property
    def backbone_trains(self) -> bool:
        """The backbone has trainable parameters. A frozen pretrained tower has none: its
        features are the same in every cell and at every epoch."""
        return self.backbone is not None and any(p.requires_grad
                                                 for p in self.backbone.parameters())

    @property
    def names(self) -> tuple[str, ...]:
        """The representations returned, in order: ``("head",)`` or ``("head", "backbone")``."""
        return (HEAD,) if self.head is None else (HEAD, BACKBONE)

    def __call__(self, x: Tensor) -> dict[str, Tensor]:
        """``{"head": model(x)}``, plus ``"backbone"`` when there is a head; one forward pass."""
        if self.backbone is None or self.head is None:
            return {HEAD: self.model(x)}
        h = self.backbone(x)
        return {HEAD: self.head(h), BACKBONE: h}


def _resnet(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    # the operations of torchvision's ResNet._forward_impl up to the pooled features
    parts = ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool"]
    missing = [p for p in [*parts, "fc"] if not hasattr(model, p)]
    if missing:
        raise ValueError(f"model = {type(model).__name__}: not a torchvision ResNet (no "
                         f"{missing}); expected the module built by make_encoder('resnet18', ...)")
    trunk = nn.Sequential(*(getattr(model, p) for p in parts), nn.Flatten(1))
    return trunk, model.get_submodule("fc")


def _layers(model: nn.Module, arch: str) -> tuple[list[nn.Module], nn.Module]:
    """(leading modules, the trailing Linear) of a Linear / Sequential vector encoder."""
    if isinstance(model, nn.Linear):
        return [], model
    if isinstance(model, nn.Sequential):
        mods = list(model)
        if len(mods) == 2 and isinstance(mods[0], nn.Flatten) and not isinstance(
                mods[1], nn.Flatten):
            lead, last = _layers(mods[1], arch)
            return [mods[0], *lead], last
        if mods and isinstance(mods[-1], nn.Linear):
            return mods[:-1], mods[-1]
    raise ValueError(f"model = {type(model).__name__}: not a {arch} encoder ending in a Linear "
                     f"layer; expected the module built by make_encoder('{arch}', ...)")


def split_encoder(arch: str, model: nn.Module) -> EncoderSplit:
    """The backbone and head of ``model``, an encoder built by ``make_encoder(arch, ...)``."""
    if arch == "resnet18":
        trunk, fc = _resnet(model)
        return EncoderSplit(arch, trunk, fc, model)
    if arch in ("linear", "mlp"):
        lead, last = _layers(model, arch)
        if arch == "linear" or not any(isinstance(m, nn.Linear) for m in lead):
            return EncoderSplit(arch, None, None, model)  # one linear map: no backbone
        return EncoderSplit(arch, nn.Sequential(*lead), last, model)
    if arch in ("clip", "dino"):
        if not isinstance(model, PretrainedEncoder):
            raise ValueError(f"model = {type(model).__name__}: expected the PretrainedEncoder "
                             f"built by make_encoder('{arch}', ...)")
        if isinstance(model.head, nn.Identity):
            return EncoderSplit(arch, None, None, model)
        return EncoderSplit(arch, _FrozenTower(model), model.head, model)
    raise ValueError(f"arch = {arch!r}: no feature split for it; allowed: {', '.join(SPLIT_ARCHS)}")


class _FrozenTower(nn.Module):
    """adapter → tower of a PretrainedEncoder, under its own no-grad rule for a frozen tower."""

    def __init__(self, encoder: PretrainedEncoder):
        super().__init__()
        # the encoder's own modules, shared (not the encoder: its head is not the backbone's)
        self.adapter, self.tower, self.freeze = encoder.adapter, encoder.backbone, encoder.freeze

    def forward(self, x: Tensor) -> Tensor:
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze):
            out: Tensor = self.tower(self.adapter(x))
        return out


@torch.no_grad()
def embed_features(split: EncoderSplit, x: np.ndarray | Tensor, batch_size: int = ENCODE_BATCH,
                   device: torch.device | str | None = None) -> dict[str, np.ndarray]:
    """float32 ``(N, ·)`` numpy features of every representation of ``split`` for inputs ``x``.

    Runs the encoder in eval mode (restored afterwards) on ``device`` (default: where its
    parameters are), ``batch_size`` rows at a time.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size = {batch_size!r}: must be an integer >= 1")
    model = split.model
    dev = torch.device(device) if device is not None else next(
        iter(model.parameters()), torch.empty(0)).device
    xs = x if isinstance(x, Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    was_training = model.training
    model.eval()
    parts: dict[str, list[Tensor]] = {name: [] for name in split.names}
    try:
        for first in range(0, xs.shape[0], batch_size):
            for name, value in split(xs[first:first + batch_size].to(dev)).items():
                parts[name].append(value.float().cpu())
    finally:
        model.train(was_training)
    return {name: torch.cat(v).numpy() for name, v in parts.items()}
