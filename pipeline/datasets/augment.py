"""Batched random views, every draw from the caller's ``torch.Generator``.

torchvision.transforms draw from torch's global RNG, so the image views here are written in plain
torch: one random resized crop per sample through an affine grid (``F.affine_grid`` +
``F.grid_sample``), an optional horizontal flip folded into the same affine map, then brightness
and contrast jitter (SimCLR's recipe without hue/saturation/greyscale, in a fixed order).
Random numbers are drawn on the generator's device and moved to the batch's device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import torch
import torch.nn.functional as F
from annotated_types import Ge, Interval, Len
from torch import Tensor

from pipeline.datasets.gaussian_channel import gaussian_channel_view
from pipeline.datasets.synthetic import augment as channel_jitter
from pipeline.options import OptionError, option

Probability = Annotated[float, Interval(ge=0, le=1)]
Correlation = Annotated[float, Interval(ge=0, le=1)]


@dataclass(frozen=True)
class ChannelJitterOptions:
    """SPEC.md §2's view: x' = A·x + √(1−A²)·ε, then noise, feature dropout and a log-normal scale."""

    a: Correlation = option(0.6, "the channel correlation A, in [0, 1]")
    noise_std: Annotated[float, Ge(0)] = option(0.2, "std of the additive noise per view")
    dropout: Annotated[float, Interval(ge=0, lt=1)] = option(
        0.1, "probability that a feature is zeroed, in [0, 1) (1 would erase the view)")
    scale_std: Annotated[float, Ge(0)] = option(0.1, "σ of the per-sample scale exp(N(0, σ²))")


@dataclass(frozen=True)
class ChannelOptions:
    """The Gaussian channel alone, so that the density ratio stays closed-form."""

    a: Annotated[float, Interval(ge=0, lt=1)] = option(
        0.6, "the channel correlation A_c, in [0, 1) (the density ratio needs A_c < 1)")


@dataclass(frozen=True)
class BitFlipOptions:
    flip_prob: Probability = option(0.001, "probability that each bit flips")


Pair = Annotated[list[float], Len(2, 2)]


def _ordered_pair(name: str, pair: list[float], lo: float, hi: float) -> None:
    if not lo <= pair[0] <= pair[1] <= hi:
        raise OptionError(name, pair, f"must be a pair [a, b] with {lo} <= a <= b <= {hi}")


@dataclass(frozen=True)
class ImageViewOptions:
    """A random resized crop (+ flip), then brightness and contrast jitter (see :func:`image_view`)."""

    crop_scale: Pair = option([0.6, 1.0], "range of the crop's area fraction, [a, b] in [0.01, 1]")
    crop_ratio: Pair = option([0.75, 4 / 3], "range of the crop's aspect ratio, [a, b] in [0.1, 10]")
    hflip: bool = option(False, "mirror horizontally with probability 1/2")
    brightness: Probability = option(0.4, "x·U(1 − b, 1 + b)")
    contrast: Probability = option(0.4, "(x − mean)·U(1 − c, 1 + c) + mean")

    def __post_init__(self) -> None:
        _ordered_pair("crop_scale", self.crop_scale, 0.01, 1.0)
        _ordered_pair("crop_ratio", self.crop_ratio, 0.1, 10.0)


def _rand(shape: tuple[int, ...], generator: torch.Generator, like: Tensor) -> Tensor:
    """U[0, 1) of ``shape`` from ``generator``, in ``like``'s dtype and device."""
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=torch.float64)
    return u.to(device=like.device, dtype=like.dtype)


def _uniform(lo: float, hi: float, shape: tuple[int, ...], generator: torch.Generator,
             like: Tensor) -> Tensor:
    return lo + (hi - lo) * _rand(shape, generator, like)


def bit_flip(x: Tensor, flip_prob: float, generator: torch.Generator) -> Tensor:
    """Flip each bit of a {0, 1} batch ``(..., D)`` independently with probability ``flip_prob``."""
    flip = (_rand(tuple(x.shape), generator, x) < flip_prob).to(x.dtype)
    return x + flip - 2 * x * flip


def crop_flip_grid(batch: int, height: int, width: int, crop_scale: tuple[float, float],
                   crop_ratio: tuple[float, float], hflip: bool, generator: torch.Generator,
                   like: Tensor) -> Tensor:
    """Sampling grids ``(B, H, W, 2)`` of per-sample random resized crops (+ flips).

    Area fraction s ~ U(crop_scale), aspect ratio r log-uniform in crop_ratio; the crop spans
    w = √(s·r), h = √(s/r) of the image (clipped to 1), its centre uniform among the positions
    inside the image; with ``hflip`` the x axis is mirrored with probability 1/2.
    """
    area = _uniform(*crop_scale, (batch,), generator, like)
    log_r = _uniform(math.log(crop_ratio[0]), math.log(crop_ratio[1]), (batch,), generator, like)
    w = torch.sqrt(area * torch.exp(log_r)).clamp(max=1.0)
    h = torch.sqrt(area / torch.exp(log_r)).clamp(max=1.0)
    cx = (2 * _rand((batch,), generator, like) - 1) * (1 - w)
    cy = (2 * _rand((batch,), generator, like) - 1) * (1 - h)
    sign = torch.ones_like(w)
    if hflip:
        sign = torch.where(_rand((batch,), generator, like) < 0.5, -sign, sign)
    zero = torch.zeros_like(w)
    theta = torch.stack([torch.stack([w * sign, zero, cx], -1),
                         torch.stack([zero, h, cy], -1)], 1)  # (B, 2, 3): output → input coords
    return F.affine_grid(theta, [batch, 1, height, width], align_corners=False)


def image_view(x: Tensor, generator: torch.Generator, crop_scale: tuple[float, float] = (0.6, 1.0),
               crop_ratio: tuple[float, float] = (3 / 4, 4 / 3), hflip: bool = False,
               brightness: float = 0.4, contrast: float = 0.4) -> Tensor:
    """One random view of an image batch ``(B, C, H, W)`` in [0, 1] → same shape, in [0, 1].

    Crop (bilinear resampling back to H×W, border padding) and flip, then brightness
    x·U(1−b, 1+b) and contrast (x − m)·U(1−c, 1+c) + m with m the image's mean; clamped to [0, 1].
    """
    if x.dim() != 4:
        raise ValueError(f"x.shape = {tuple(x.shape)}: image views need (B, C, H, W)")
    b, _, height, width = x.shape
    scale_lo, scale_hi = crop_scale  # YAML gives lists
    ratio_lo, ratio_hi = crop_ratio
    grid = crop_flip_grid(b, height, width, (scale_lo, scale_hi), (ratio_lo, ratio_hi), hflip,
                          generator, x)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    out = out * _uniform(1 - brightness, 1 + brightness, (b, 1, 1, 1), generator, x)
    mean = out.mean(dim=(1, 2, 3), keepdim=True)
    out = (out - mean) * _uniform(1 - contrast, 1 + contrast, (b, 1, 1, 1), generator, x) + mean
    return out.clamp(0.0, 1.0)


def channel_jitter_view(x: Tensor, generator: torch.Generator, a: float = 0.6,
                        noise_std: float = 0.2, dropout: float = 0.1,
                        scale_std: float = 0.1) -> Tensor:
    """SPEC.md §2's view of ``(..., D)``: Gaussian channel, then noise, dropout and scale."""
    return channel_jitter(x, a, noise_std, dropout, scale_std, generator)


def channel_view(x: Tensor, generator: torch.Generator, a: float = 0.6) -> Tensor:
    """The Gaussian channel alone (no jitter), so the density ratio stays closed-form."""
    return gaussian_channel_view(x, a, generator)


def bit_flip_view(x: Tensor, generator: torch.Generator, flip_prob: float = 0.001) -> Tensor:
    return bit_flip(x, flip_prob, generator)


@dataclass(frozen=True)
class AugmentationSpec:
    """A family of views: the function ``(x, generator, **options) -> x'`` and its options."""

    view: Callable[..., Tensor]
    options: type


AUGMENTATIONS: dict[str, AugmentationSpec] = {
    "channel_jitter": AugmentationSpec(channel_jitter_view, ChannelJitterOptions),
    "channel": AugmentationSpec(channel_view, ChannelOptions),
    "bit_flip": AugmentationSpec(bit_flip_view, BitFlipOptions),
    "image": AugmentationSpec(image_view, ImageViewOptions),
}
