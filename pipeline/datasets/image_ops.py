"""Batched photometric image operations with one factor per image, in plain torch.

Each takes a batch ``(B, C, H, W)`` of values in [0, 1] (C = 1 or 3) and per-image factors ``(B,)``
and gives the same shape. They are the operations of ``torchvision.transforms.functional`` on
float tensors, applied image by image with that image's factor (same formulas, same clamping to
[0, 1] after each one), so a view built from them is the torchvision recipe with every draw taken
from the caller's generator:

- brightness ``f·x``; contrast ``f·x + (1 − f)·m`` with m the mean of the image's luma;
  saturation ``f·x + (1 − f)·luma(x)``; each clamped to [0, 1];
- hue: RGB → HSV, h ← (h + f) mod 1, HSV → RGB (f in [−0.5, 0.5]);
- luma (``rgb_to_grayscale``): 0.2989·R + 0.587·G + 0.114·B (ITU-R 601-2, as torchvision);
- Gaussian blur: a normalised kernel exp(−t²/(2σ²)) on t = −r..r, reflect padding, separable.

On one channel, saturation and hue leave the image as it is (torchvision does the same) and the
luma is the image itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

LUMA = (0.2989, 0.587, 0.114)


def _check(x: Tensor) -> None:
    if x.dim() != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"x.shape = {tuple(x.shape)}: expected images (B, C, H, W) with C = 1 "
                         "(grey) or 3 (RGB)")


def _per_image(factor: Tensor, x: Tensor) -> Tensor:
    return factor.to(device=x.device, dtype=x.dtype).reshape(-1, 1, 1, 1)


def _blend(a: Tensor, b: Tensor, ratio: Tensor) -> Tensor:
    return (ratio * a + (1.0 - ratio) * b).clamp(0.0, 1.0)


def luma(x: Tensor) -> Tensor:
    """``(B, 1, H, W)``: the grey level of each pixel (the image itself when C = 1)."""
    _check(x)
    if x.shape[1] == 1:
        return x
    r, g, b = x.unbind(dim=1)
    return (LUMA[0] * r + LUMA[1] * g + LUMA[2] * b).unsqueeze(1)


def grayscale(x: Tensor) -> Tensor:
    """The luma repeated over x's channels (torchvision ``rgb_to_grayscale(x, C)``)."""
    return luma(x).expand_as(x).contiguous()


def adjust_brightness(x: Tensor, factor: Tensor) -> Tensor:
    """``f·x`` clamped to [0, 1]; factor ``(B,)`` >= 0 (1: unchanged)."""
    _check(x)
    return _blend(x, torch.zeros_like(x), _per_image(factor, x))


def adjust_contrast(x: Tensor, factor: Tensor) -> Tensor:
    """``f·x + (1 − f)·m``, m the image's mean luma, clamped to [0, 1]; factor ``(B,)`` >= 0."""
    mean = luma(x).mean(dim=(1, 2, 3), keepdim=True)
    return _blend(x, mean, _per_image(factor, x))


def adjust_saturation(x: Tensor, factor: Tensor) -> Tensor:
    """``f·x + (1 − f)·luma(x)`` clamped to [0, 1] (0: grey, 1: unchanged); C = 1: unchanged."""
    _check(x)
    if x.shape[1] == 1:
        return x
    return _blend(x, luma(x), _per_image(factor, x))


def rgb_to_hsv(x: Tensor) -> Tensor:
    """``(B, 3, H, W)`` RGB in [0, 1] → (hue in [0, 1), saturation, value); hue = saturation = 0
    where the pixel is grey (max = min)."""
    r, g, b = x.unbind(dim=1)
    value, _ = x.max(dim=1)
    chroma = value - x.min(dim=1).values
    grey = chroma == 0
    c = torch.where(grey, torch.ones_like(chroma), chroma)
    sextant = torch.where(value == r, torch.remainder((g - b) / c, 6.0),
                          torch.where(value == g, (b - r) / c + 2.0, (r - g) / c + 4.0))
    hue = torch.where(grey, torch.zeros_like(chroma), sextant / 6.0)
    sat = torch.where(grey, torch.zeros_like(chroma), chroma / torch.where(grey, c, value))
    return torch.stack((torch.remainder(hue, 1.0), sat, value), dim=1)


def hsv_to_rgb(hsv: Tensor) -> Tensor:
    """Inverse of :func:`rgb_to_hsv`: channel n ∈ {R: 5, G: 3, B: 1} is
    v − v·s·clip(min(k, 4 − k), 0, 1) with k = (n + 6h) mod 6."""
    h, s, v = hsv.unbind(dim=1)
    out = []
    for n in (5.0, 3.0, 1.0):
        k = torch.remainder(n + 6.0 * h, 6.0)
        out.append(v - v * s * torch.minimum(k, 4.0 - k).clamp(0.0, 1.0))
    return torch.stack(out, dim=1).clamp(0.0, 1.0)


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate each image's hue by ``shift`` ``(B,)`` in [−0.5, 0.5] turns; C = 1: unchanged."""
    _check(x)
    if x.shape[1] == 1:
        return x
    hsv = rgb_to_hsv(x)
    hue = torch.remainder(hsv[:, :1] + _per_image(shift, x), 1.0)
    return hsv_to_rgb(torch.cat((hue, hsv[:, 1:]), dim=1))


def gaussian_blur(x: Tensor, sigma: Tensor, radius: int) -> Tensor:
    """Blur each image with its own σ ``(B,)`` > 0 by a (2·radius + 1)² Gaussian kernel (reflect
    padding, as torchvision ``gaussian_blur``); radius 0 leaves x as it is."""
    if radius == 0:
        return x
    b, c, height, width = x.shape
    if radius >= min(height, width):
        raise ValueError(f"radius = {radius}: reflect padding needs radius < the image side "
                         f"{min(height, width)}")
    t = torch.arange(-radius, radius + 1, device=x.device, dtype=x.dtype)
    pdf = torch.exp(-0.5 * (t / sigma.to(device=x.device, dtype=x.dtype)[:, None]) ** 2)
    weight = (pdf / pdf.sum(dim=1, keepdim=True)).repeat_interleave(c, dim=0)  # (B·C, 2r + 1)
    y = x.reshape(1, b * c, height, width)
    y = F.conv2d(F.pad(y, (radius, radius, 0, 0), mode="reflect"),
                 weight[:, None, None, :], groups=b * c)
    y = F.conv2d(F.pad(y, (0, 0, radius, radius), mode="reflect"),
                 weight[:, None, :, None], groups=b * c)
    return y.reshape(b, c, height, width)
