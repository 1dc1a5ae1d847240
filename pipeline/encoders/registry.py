"""The encoder registry: arch name → builder, options with defaults, accepted dataset kinds.

``make_encoder(arch, input_shape, embed_dim, options)`` maps inputs ``(B, *input_shape)`` to raw
embeddings ``(B, embed_dim)`` (not normalised). Builders draw their initial weights from torch's
global RNG: build inside ``pipeline.seeding.seeded_init`` for reproducible weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Gt, Len
from torch import nn

from pipeline.encoders.pretrained import clip_encoder, dino_encoder
from pipeline.encoders.resnet import resnet18
from pipeline.encoders.simple import linear, mlp
from pipeline.options import REQUIRED, OptionError, defaults, fill, option

Builder = Callable[[tuple[int, ...], int, Mapping[str, Any]], nn.Module]


@dataclass(frozen=True)
class EncoderSpec:
    """One registered encoder. ``options``: a frozen dataclass of its options
    (``arch_options.<arch>``, see :mod:`pipeline.options`); ``kind``: the dataset kinds it takes;
    ``modules``: where its network is built, for readers (the code fingerprint follows the
    builder's references and does not read it)."""

    build: Builder
    options: type
    kind: tuple[str, ...]
    modules: tuple[str, ...] = ()

    @property
    def defaults(self) -> dict[str, Any]:
        return defaults(self.options)


def _flat(build: Callable[..., nn.Module]) -> Builder:
    """A vector encoder that also takes images, flattened: (B, C, H, W) → (B, C·H·W)."""
    def wrapped(shape: tuple[int, ...], embed_dim: int, o: Mapping[str, Any]) -> nn.Module:
        net = build(math.prod(shape), embed_dim, **o)
        return net if len(shape) == 1 else nn.Sequential(nn.Flatten(), net)
    return wrapped


@dataclass(frozen=True)
class LinearOptions:
    bias: bool = option(False, "z = W x + b instead of z = W x")


@dataclass(frozen=True)
class MlpOptions:
    hidden: Annotated[list[Annotated[int, Gt(0)]], Len(1)] = option(
        [128], "widths of the hidden layers")
    bias: bool = option(True, "biases in every layer")


@dataclass(frozen=True)
class ResnetOptions:
    small_stem: bool = option(
        True, "3×3 stride-1 first convolution and no max-pool (8–32 px images)")
    width: Annotated[int, Gt(0)] = option(
        64, "channels of the first stage (the stages have 1, 2, 4, 8 × width; 64 is "
            "torchvision's ResNet-18, 16 about 1/16 of its multiply-adds)")


@dataclass(frozen=True)
class PretrainedOptions:
    """What CLIP and DINO towers share: a local weights file, the head, freezing, input norm."""

    weights: str | None = option(REQUIRED, "path to the local weights file (nothing is "
                                           "downloaded)")
    head: Literal["linear", "none"] = option(
        "linear", "a trained linear head to embed_dim, or none")
    freeze: bool = option(True, "keep the pretrained tower fixed")
    normalize: bool = option(True, "apply the model's input mean/std")

    def __post_init__(self) -> None:
        if self.weights is REQUIRED:
            raise OptionError("weights", None, "a path to a local weights file is required "
                              "(nothing is downloaded)")


@dataclass(frozen=True)
class ClipOptions(PretrainedOptions):
    model: Annotated[str, Len(1)] = option("ViT-B-32", "an open_clip model name or a local .json "
                                                       "config (a whole CLIP or its image tower)")
    quick_gelu: bool = option(False, "QuickGELU activations (OpenAI's original weights)")


@dataclass(frozen=True)
class DinoOptions(PretrainedOptions):
    model: Annotated[str, Len(1)] = option(
        "vit_small_patch16_224.dino", "a timm model name (with tag)")
    model_kwargs: dict[str, Any] = option({}, "extra keyword arguments of timm.create_model")


SIMPLE, RESNET, PRETRAINED = ("pipeline.encoders.simple",), ("pipeline.encoders.resnet",), \
    ("pipeline.encoders.pretrained",)
ENCODERS: dict[str, EncoderSpec] = {
    "linear": EncoderSpec(_flat(linear), LinearOptions, ("vector", "image"), SIMPLE),
    "mlp": EncoderSpec(_flat(mlp), MlpOptions, ("vector", "image"), SIMPLE),
    "resnet18": EncoderSpec(lambda s, d, o: resnet18(s, d, **o), ResnetOptions, ("image",), RESNET),
    "clip": EncoderSpec(lambda s, d, o: clip_encoder(s, d, **o), ClipOptions, ("image",),
                        PRETRAINED),
    "dino": EncoderSpec(lambda s, d, o: dino_encoder(s, d, **o), DinoOptions, ("image",),
                        PRETRAINED),
}


def _spec(arch: str) -> EncoderSpec:
    if arch not in ENCODERS:
        raise ValueError(f"grid.arch = {arch!r}: unknown architecture; allowed: {sorted(ENCODERS)}")
    return ENCODERS[arch]


def resolve_encoder_options(arch: str, given: Mapping[str, Any] | None,
                            where: str | None = None) -> dict[str, Any]:
    """Every option of ``arch``: defaults overlaid with ``given`` (values are validated by the
    params schema, ``pipeline.config``); errors name ``where.key`` (default
    ``arch_options.<arch>``)."""
    return fill(_spec(arch).options, given, where or f"arch_options.{arch}")


def make_encoder(arch: str, input_shape: tuple[int, ...], embed_dim: int,
                 options: Mapping[str, Any] | None = None) -> nn.Module:
    """Build ``arch`` for inputs of ``input_shape`` (no batch axis): ``(D,)`` or ``(C, H, W)``."""
    spec = _spec(arch)
    shape = tuple(int(s) for s in input_shape)
    kind = "vector" if len(shape) == 1 else "image" if len(shape) == 3 else None
    if kind not in spec.kind:
        raise ValueError(f"input_shape = {shape}: {arch} takes {' or '.join(spec.kind)} inputs "
                         "((D,) vectors, (C, H, W) images)")
    if isinstance(embed_dim, bool) or not isinstance(embed_dim, int) or embed_dim <= 0:
        raise ValueError(f"grid.embed_dim = {embed_dim!r}: must be an integer > 0")
    return spec.build(shape, embed_dim, resolve_encoder_options(arch, options))
