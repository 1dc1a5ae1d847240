"""Batched random views, every draw from the caller's ``torch.Generator``.

torchvision.transforms draw from torch's global RNG, so the image views here are written in plain
torch: one random resized crop per sample through an affine grid (``F.affine_grid`` +
``F.grid_sample``), an optional horizontal flip folded into the same affine map, then SimCLR's
colour jitter, random greyscale and (optionally) Gaussian blur, batched with per-image factors
(:mod:`pipeline.datasets.image_ops`).
Random numbers are drawn on the generator's device and moved to the batch's device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from annotated_types import Ge, Interval, Len
from torch import Tensor

from pipeline.datasets.gaussian_channel import gaussian_channel_view
from pipeline.datasets.image_ops import (
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    gaussian_blur,
    grayscale,
)
from pipeline.datasets.synthetic import augment as channel_jitter
from pipeline.options import OptionError, option

Probability = Annotated[float, Interval(ge=0, le=1)]
Correlation = Annotated[float, Interval(ge=0, le=1)]


@dataclass(frozen=True)
class ChannelJitterOptions:
    # the docstring is one line: it is this model's description in the params schema
    ("SPEC.md §2's view: x' = A·x + √(1−A²)·ε, then noise, feature dropout and a log-normal "
     "scale.")

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


Strength = Annotated[float, Interval(ge=0, le=1)]


@dataclass(frozen=True)
class ImageViewOptions:
    """SimCLR's views (Chen et al. 2020, arXiv 2002.05709, Appendix A; CIFAR-10: B.9): a random
    resized crop (+ flip), colour jitter applied with probability ``jitter_prob`` (brightness,
    contrast, saturation, hue, in a random order per image), random greyscale, Gaussian blur
    (ImageNet only in SimCLR: off by default). Defaults: the CIFAR-10 recipe, colour strength
    s = 0.5 (0.8·s, 0.8·s, 0.8·s, 0.2·s). On grey images (C = 1) saturation, hue and greyscale do
    nothing: brightness and contrast are their intensity jitter (see :func:`image_view`)."""

    crop_scale: Pair = option([0.08, 1.0], "range of the crop's area fraction, [a, b] in [0.01, 1]")
    crop_ratio: Pair = option([0.75, 4 / 3],
                              "range of the crop's aspect ratio, [a, b] in [0.1, 10]")
    hflip: bool = option(False, "mirror horizontally with probability 1/2")
    jitter_prob: Probability = option(0.8, "probability that an image gets the colour jitter")
    brightness: Strength = option(0.4, "x·U(1 − b, 1 + b)")
    contrast: Strength = option(0.4, "(x − m)·U(1 − c, 1 + c) + m, m the image's mean grey level")
    saturation: Strength = option(0.4, "blend with the grey image by U(1 − s, 1 + s) (RGB only)")
    hue: Annotated[float, Interval(ge=0, le=0.5)] = option(
        0.1, "hue rotated by U(−h, h) turns, h in [0, 0.5] (RGB only)")
    jitter_order: Literal["random", "fixed"] = option(
        "random", "order of the four jitters: a random permutation per image (torchvision's "
        "ColorJitter, SimCLR), or brightness, contrast, saturation, hue")
    grayscale_prob: Probability = option(0.2, "probability of a greyscale view (RGB only)")
    blur_prob: Probability = option(0.0, "probability of a Gaussian blur (SimCLR: 0.5, ImageNet)")
    blur_sigma: Pair = option([0.1, 2.0], "range of the blur's σ in pixels, [a, b] in [0.01, 10]")
    blur_kernel: Annotated[float, Interval(ge=0, le=0.5)] = option(
        0.1, "kernel side as a fraction of the image's shorter side (SimCLR: 0.1; made odd)")

    def __post_init__(self) -> None:
        _ordered_pair("crop_scale", self.crop_scale, 0.01, 1.0)
        _ordered_pair("crop_ratio", self.crop_ratio, 0.1, 10.0)
        _ordered_pair("blur_sigma", self.blur_sigma, 0.01, 10.0)


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


JITTERS = ("brightness", "contrast", "saturation", "hue")  # the fixed order, and the op ids


def _jitter_op(x: Tensor, op: int, factor: Tensor) -> Tensor:
    ops = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)
    return ops[op](x, factor)


def colour_jitter(x: Tensor, factors: Tensor, order: Tensor, apply: Tensor,
                  strengths: tuple[float, float, float, float]) -> Tensor:
    """Jitter the images where ``apply`` ``(B,)`` is True: at step r each applies the op
    ``order[:, r]`` (ids in :data:`JITTERS`) with its factor ``factors[:, op]`` ``(B, 4)``.
    Ops of strength 0 are skipped (their factor would leave the image unchanged)."""
    out = x.clone()
    for step in range(len(JITTERS)):
        for op, strength in enumerate(strengths):
            chosen = apply & (order[:, step] == op)
            if strength > 0 and bool(chosen.any()):
                out[chosen] = _jitter_op(out[chosen], op, factors[chosen, op])
    return out


def image_view(x: Tensor, generator: torch.Generator, crop_scale: tuple[float, float] = (0.08, 1.0),
               crop_ratio: tuple[float, float] = (3 / 4, 4 / 3), hflip: bool = False,
               jitter_prob: float = 0.8, brightness: float = 0.4, contrast: float = 0.4,
               saturation: float = 0.4, hue: float = 0.1, jitter_order: str = "random",
               grayscale_prob: float = 0.2, blur_prob: float = 0.0,
               blur_sigma: tuple[float, float] = (0.1, 2.0), blur_kernel: float = 0.1) -> Tensor:
    """One random view of an image batch ``(B, C, H, W)`` in [0, 1] (C = 1 or 3) → same shape.

    SimCLR's pipeline (``transforms.Compose`` order): crop (bilinear resampling back to H×W,
    border padding) and flip; with probability ``jitter_prob`` colour jitter — brightness factor
    U(1 − b, 1 + b), contrast U(1 − c, 1 + c), saturation U(1 − s, 1 + s), hue shift U(−h, h),
    applied in a random order per image (``jitter_order: random``, torchvision's ColorJitter) or
    in that order, each clamped to [0, 1] (:mod:`pipeline.datasets.image_ops`); greyscale with
    probability ``grayscale_prob``; Gaussian blur with probability ``blur_prob``, σ ~ U(blur_sigma),
    kernel radius ⌊blur_kernel·min(H, W)⌋ // 2 (SimCLR: side // 10, made odd). On C = 1
    saturation, hue and greyscale do nothing.

    Every random number comes from ``generator``, in a fixed order whatever the options (the
    crops, then per image: jitter or not, four factors, the order, greyscale or not, blur or not,
    σ), so changing one option's strength does not change the other draws.
    """
    if x.dim() != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"x.shape = {tuple(x.shape)}: image views need (B, C, H, W) with C = 1 "
                         "or 3")
    b, _, height, width = x.shape
    scale_lo, scale_hi = crop_scale  # YAML gives lists
    ratio_lo, ratio_hi = crop_ratio
    grid = crop_flip_grid(b, height, width, (scale_lo, scale_hi), (ratio_lo, ratio_hi), hflip,
                          generator, x)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    jitter = _rand((b,), generator, x) < jitter_prob
    strengths = (brightness, contrast, saturation, hue)
    u = _rand((b, 4), generator, x)
    lows = torch.tensor([1 - brightness, 1 - contrast, 1 - saturation, -hue], dtype=x.dtype,
                        device=x.device)
    factors = lows + 2 * torch.tensor(strengths, dtype=x.dtype, device=x.device) * u
    keys = _rand((b, 4), generator, x)
    order = (keys.argsort(dim=1) if jitter_order == "random"
             else torch.arange(4, device=x.device).expand(b, 4))
    out = colour_jitter(out, factors, order, jitter, strengths)
    grey = _rand((b,), generator, x) < grayscale_prob
    if out.shape[1] == 3 and bool(grey.any()):
        out[grey] = grayscale(out[grey])
    blur = _rand((b,), generator, x) < blur_prob
    sigma = _uniform(blur_sigma[0], blur_sigma[1], (b,), generator, x)
    radius = int(blur_kernel * min(height, width)) // 2
    if radius and bool(blur.any()):
        out[blur] = gaussian_blur(out[blur], sigma[blur], radius)
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
