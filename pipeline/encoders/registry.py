"""The encoder registry: arch name → builder, options with defaults, accepted dataset kinds.

``make_encoder(arch, input_shape, embed_dim, options)`` maps inputs ``(B, *input_shape)`` to raw
embeddings ``(B, embed_dim)`` (not normalised). Builders draw their initial weights from torch's
global RNG: build inside ``pipeline.seeding.seeded_init`` for reproducible weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from pipeline.datasets import options as opt
from pipeline.encoders.pretrained import clip_encoder, dino_encoder
from pipeline.encoders.resnet import resnet18
from pipeline.encoders.simple import linear, mlp

Builder = Callable[[tuple[int, ...], int, Mapping[str, Any]], nn.Module]


@dataclass(frozen=True)
class EncoderSpec:
    """One registered encoder; ``kind`` lists the dataset kinds it accepts."""

    build: Builder
    defaults: Mapping[str, Any]
    checks: Mapping[str, opt.Check]
    kind: tuple[str, ...]

    def validate(self, options: Mapping[str, Any], where: str) -> None:
        """Raise ``ValueError("<where>.<key> = <value>: <allowed>")`` on an unknown or bad option."""
        opt.validate(self.checks, options, where)


def _flat(build: Callable[..., nn.Module]) -> Builder:
    """A vector encoder that also takes images, flattened: (B, C, H, W) → (B, C·H·W)."""
    def wrapped(shape: tuple[int, ...], embed_dim: int, o: Mapping[str, Any]) -> nn.Module:
        net = build(math.prod(shape), embed_dim, **o)
        return net if len(shape) == 1 else nn.Sequential(nn.Flatten(), net)
    return wrapped


PRETRAINED_CHECKS = {"model": opt.text, "weights": opt.required_path,
                     "head": opt.one_of("linear", "none"), "freeze": opt.boolean,
                     "normalize": opt.boolean}

ENCODERS: dict[str, EncoderSpec] = {
    "linear": EncoderSpec(_flat(linear), {"bias": False}, {"bias": opt.boolean},
                          ("vector", "image")),
    "mlp": EncoderSpec(_flat(mlp), {"hidden": [128], "bias": True},
                       {"hidden": opt.int_list, "bias": opt.boolean}, ("vector", "image")),
    "resnet18": EncoderSpec(lambda s, d, o: resnet18(s, d, **o), {"small_stem": True},
                            {"small_stem": opt.boolean}, ("image",)),
    "clip": EncoderSpec(
        lambda s, d, o: clip_encoder(s, d, **o),
        {"model": "ViT-B-32", "weights": None, "head": "linear", "freeze": True,
         "normalize": True, "quick_gelu": False},
        {**PRETRAINED_CHECKS, "quick_gelu": opt.boolean}, ("image",)),
    "dino": EncoderSpec(
        lambda s, d, o: dino_encoder(s, d, **o),
        {"model": "vit_small_patch16_224.dino", "weights": None, "head": "linear", "freeze": True,
         "normalize": True, "model_kwargs": {}},
        {**PRETRAINED_CHECKS, "model_kwargs": opt.mapping}, ("image",)),
}


def _spec(arch: str) -> EncoderSpec:
    if arch not in ENCODERS:
        raise ValueError(f"grid.arch = {arch!r}: unknown architecture; allowed: {sorted(ENCODERS)}")
    return ENCODERS[arch]


def resolve_encoder_options(arch: str, given: Mapping[str, Any] | None,
                            where: str | None = None) -> dict[str, Any]:
    """Every option of ``arch``: defaults overlaid with ``given``, validated.

    Errors name ``where.key`` (default ``arch_options.<arch>``), the value and what is allowed.
    """
    spec = _spec(arch)
    return opt.resolve(spec.checks, spec.defaults, given, where or f"arch_options.{arch}")


def make_encoder(arch: str, input_shape: tuple[int, ...], embed_dim: int,
                 options: Mapping[str, Any] | None = None) -> nn.Module:
    """Build ``arch`` for inputs of ``input_shape`` (no batch axis): ``(D,)`` or ``(C, H, W)``."""
    spec = _spec(arch)
    shape = tuple(int(s) for s in input_shape)
    kind = "vector" if len(shape) == 1 else "image" if len(shape) == 3 else None
    if kind not in spec.kind:
        raise ValueError(f"input_shape = {shape}: {arch} takes {' or '.join(spec.kind)} inputs "
                         "((D,) vectors, (C, H, W) images)")
    if opt.positive_int(embed_dim) is not None:
        raise ValueError(f"grid.embed_dim = {embed_dim!r}: must be an integer > 0")
    return spec.build(shape, embed_dim, resolve_encoder_options(arch, options))
