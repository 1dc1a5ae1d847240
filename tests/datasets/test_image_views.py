"""SimCLR's image views in plain torch: parity of each colour op with
torchvision.transforms.functional on fixed factors, and each option doing what it says."""

from __future__ import annotations

import itertools

import pytest
import torch
import torchvision.transforms.functional as TF

from pipeline.datasets import image_ops as ops
from pipeline.datasets import make_augmenter, resolve_augment_options
from pipeline.datasets.augment import JITTERS, colour_jitter, image_view

# float64 images: our ops and torchvision's differ only by rounding, far below ATOL; torchvision
# rotates hue in float32 whatever the input dtype (hue's formulas are also written differently
# here, algebraically equal): HUE_ATOL is a few float32 ulps of values in [0, 1]
ATOL = 1e-10
HUE_ATOL = 2e-6
NONE = {"crop_scale": (1.0, 1.0), "crop_ratio": (1.0, 1.0), "hflip": False, "jitter_prob": 0.0,
        "brightness": 0.0, "contrast": 0.0, "saturation": 0.0, "hue": 0.0,
        "grayscale_prob": 0.0, "blur_prob": 0.0}


def _images(b: int = 8, c: int = 3, size: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.rand(b, c, size, size, generator=torch.Generator().manual_seed(seed),
                      dtype=torch.float64)


def _gen(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


TV_OPS = {"brightness": (ops.adjust_brightness, TF.adjust_brightness, (0.0, 1.9)),
          "contrast": (ops.adjust_contrast, TF.adjust_contrast, (0.0, 1.9)),
          "saturation": (ops.adjust_saturation, TF.adjust_saturation, (0.0, 1.9)),
          "hue": (ops.adjust_hue, TF.adjust_hue, (-0.5, 0.5))}


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("name", list(TV_OPS))
def test_colour_ops_match_torchvision_image_by_image(name, channels):
    ours, theirs, (lo, hi) = TV_OPS[name]
    x = _images(c=channels)
    factors = torch.linspace(lo, hi, x.shape[0], dtype=torch.float64)
    out = ours(x, factors)
    for img, f, o in zip(x, factors.tolist(), out, strict=True):
        torch.testing.assert_close(o, theirs(img, f), atol=HUE_ATOL if name == "hue" else ATOL,
                                   rtol=0)


def test_grayscale_and_blur_match_torchvision():
    x = _images()
    torch.testing.assert_close(ops.grayscale(x), TF.rgb_to_grayscale(x, num_output_channels=3),
                               atol=ATOL, rtol=0)
    sigma = torch.tensor([0.1, 0.5, 1.0, 1.7, 2.0, 3.0, 0.8, 1.2], dtype=torch.float64)
    for radius in (1, 3):
        out = ops.gaussian_blur(x, sigma, radius)
        for img, s, o in zip(x, sigma.tolist(), out, strict=True):
            ref = TF.gaussian_blur(img, [2 * radius + 1] * 2, [s, s])
            torch.testing.assert_close(o, ref, atol=ATOL, rtol=0)
    assert ops.gaussian_blur(x, sigma, 0) is x
    with pytest.raises(ValueError, match=r"radius = 16: reflect padding needs radius < the image"):
        ops.gaussian_blur(x, sigma, 16)


def test_hsv_round_trip_and_grey_pixels():
    x = _images()
    torch.testing.assert_close(ops.hsv_to_rgb(ops.rgb_to_hsv(x)), x, atol=ATOL, rtol=0)
    grey = _images(c=1).expand(-1, 3, -1, -1)
    hsv = ops.rgb_to_hsv(grey)
    assert torch.equal(hsv[:, 0], torch.zeros_like(hsv[:, 0]))  # hue 0, saturation 0 on grey
    assert torch.equal(hsv[:, 1], torch.zeros_like(hsv[:, 1]))


def test_colour_jitter_applies_the_given_order_as_torchvision_would():
    # each image: its own permutation of the four jitters and its own factors; the reference
    # composes torchvision's ops in that order, image by image
    x = _images(b=24)
    perms = torch.tensor(list(itertools.permutations(range(4))))  # all 24 orders
    g = _gen()
    u = torch.rand(24, 4, generator=g, dtype=torch.float64)
    factors = torch.stack([0.6 + 0.8 * u[:, 0], 0.6 + 0.8 * u[:, 1], 0.6 + 0.8 * u[:, 2],
                           -0.1 + 0.2 * u[:, 3]], dim=1)
    apply = torch.arange(24) % 5 != 0
    out = colour_jitter(x, factors, perms, apply, (0.4, 0.4, 0.4, 0.1))
    for i in range(24):
        ref = x[i]
        if apply[i]:
            for op in perms[i].tolist():
                ref = TV_OPS[JITTERS[op]][1](ref, float(factors[i, op]))
        torch.testing.assert_close(out[i], ref, atol=HUE_ATOL, rtol=0)


def test_views_are_deterministic_under_the_generator_and_valid():
    x = _images(b=32).float()
    opts = {**resolve_augment_options("cifar10", None), "blur_prob": 0.5}
    one, two = image_view(x, _gen(3), **opts), image_view(x, _gen(3), **opts)
    assert torch.equal(one, two) and not torch.equal(one, image_view(x, _gen(4), **opts))
    assert one.shape == x.shape and one.dtype == x.dtype
    assert 0 <= float(one.min()) and float(one.max()) <= 1 and bool(torch.isfinite(one).all())


def test_defaults_are_simclr_cifar10_recipe():
    opts = resolve_augment_options("cifar10", None)
    assert opts["crop_scale"] == [0.08, 1.0] and opts["hflip"] is True
    assert (opts["jitter_prob"], opts["brightness"], opts["contrast"], opts["saturation"],
            opts["hue"]) == (0.8, 0.4, 0.4, 0.4, 0.1)  # strength s = 0.5: 0.8·s thrice, 0.2·s
    assert (opts["grayscale_prob"], opts["blur_prob"], opts["jitter_order"]) == (0.2, 0.0, "random")


def test_full_crop_is_identity_up_to_interpolation():
    # scale 1 at ratio 1 samples the pixel centres exactly; at ratio 4/3 the crop is the full
    # width (clipped) and 3/4·√(4/3)... of the height: a vertical zoom only, columns unchanged
    x = _images()
    torch.testing.assert_close(image_view(x, _gen(), **NONE), x, atol=1e-12, rtol=0)
    ramp = torch.linspace(0, 1, 16, dtype=torch.float64).expand(4, 3, 16, 16).clone()
    out = image_view(ramp, _gen(), **{**NONE, "crop_ratio": (4 / 3, 4 / 3)})
    torch.testing.assert_close(out, ramp, atol=1e-12, rtol=0)


def test_grey_rgb_images_stay_grey_under_hue_and_saturation():
    grey = _images(c=1).expand(-1, 3, -1, -1).contiguous()
    opts = {**NONE, "jitter_prob": 1.0, "saturation": 1.0, "hue": 0.5}
    out = image_view(grey, _gen(), **opts)
    torch.testing.assert_close(out[:, 0], out[:, 1], atol=ATOL, rtol=0)
    torch.testing.assert_close(out[:, 0], out[:, 2], atol=ATOL, rtol=0)


def test_hue_shift_keeps_saturation_and_value():
    x = _images(b=64) * 0.9 + 0.05
    out = image_view(x, _gen(), **{**NONE, "jitter_prob": 1.0, "hue": 0.3})
    before, after = ops.rgb_to_hsv(x), ops.rgb_to_hsv(out)
    torch.testing.assert_close(after[:, 1:], before[:, 1:], atol=1e-9, rtol=0)
    shift = torch.remainder(after[:, 0] - before[:, 0] + 0.5, 1.0) - 0.5  # in (−0.5, 0.5]
    per_image = shift.flatten(1)
    torch.testing.assert_close(per_image, per_image[:, :1].expand_as(per_image), atol=1e-9, rtol=0)
    assert float(per_image.abs().max()) <= 0.3 + 1e-9 and float(per_image.abs().max()) > 0.2


def test_brightness_and_contrast_factors_and_jitter_probability():
    x = _images(b=4000, c=1, size=4) * 0.2 + 0.4  # in [0.4, 0.6]: no clamping at ±30%
    out = image_view(x, _gen(), **{**NONE, "jitter_prob": 0.5, "brightness": 0.3})
    factor = (out / x).flatten(1)
    torch.testing.assert_close(factor, factor[:, :1].expand_as(factor), atol=1e-12, rtol=0)
    f = factor[:, 0]
    changed = (f != 1).double().mean().item()
    assert abs(changed - 0.5) < 4 * (0.25 / 4000) ** 0.5  # jitter_prob, ±4 s.e.
    assert 0.7 <= float(f.min()) and float(f.max()) <= 1.3
    out = image_view(x, _gen(), **{**NONE, "jitter_prob": 1.0, "contrast": 0.3})
    torch.testing.assert_close(out.mean(dim=(1, 2, 3)), x.mean(dim=(1, 2, 3)), atol=1e-12, rtol=0)
    ratio = out.std(dim=(1, 2, 3)) / x.std(dim=(1, 2, 3))
    assert 0.7 - 1e-9 <= float(ratio.min()) and float(ratio.max()) <= 1.3 + 1e-9
    assert float(ratio.max() - ratio.min()) > 0.5  # factors spread over the range


def test_grayscale_probability_and_blur():
    x = _images(b=2000, size=8)
    out = image_view(x, _gen(), **{**NONE, "grayscale_prob": 0.2})
    grey = ((out[:, 0] == out[:, 1]).flatten(1).all(dim=1)
            & (out[:, 1] == out[:, 2]).flatten(1).all(dim=1))
    assert abs(grey.double().mean().item() - 0.2) < 4 * (0.16 / 2000) ** 0.5
    torch.testing.assert_close(out[grey], TF.rgb_to_grayscale(x[grey], 3), atol=ATOL, rtol=0)
    torch.testing.assert_close(out[~grey], x[~grey], atol=1e-12, rtol=0)
    x = _images(b=16, size=32)
    blurred = image_view(x, _gen(), **{**NONE, "blur_prob": 1.0})  # radius ⌊0.1·32⌋ // 2 = 1

    def variation(z: torch.Tensor) -> torch.Tensor:
        return z.diff(dim=-1).abs().mean(dim=(1, 2, 3))

    assert bool((variation(blurred) < variation(x)).all())
    flat = torch.full((4, 3, 32, 32), 0.3, dtype=torch.float64)
    torch.testing.assert_close(image_view(flat, _gen(), **{**NONE, "blur_prob": 1.0}), flat,
                               atol=1e-12, rtol=0)


def test_rgb_options_do_nothing_on_grey_images_and_draws_do_not_shift():
    # every draw is made whatever the options: the crops and intensity jitter of a grey batch
    # are the same with and without the RGB-only options
    x = _images(c=1)
    base = {**NONE, "crop_scale": (0.2, 1.0), "jitter_prob": 0.8, "brightness": 0.4,
            "contrast": 0.4}
    rgb_only = {"saturation": 0.9, "hue": 0.5, "grayscale_prob": 1.0}
    torch.testing.assert_close(image_view(x, _gen(), **{**base, **rgb_only}),
                               image_view(x, _gen(), **base), atol=0, rtol=0)


def test_image_view_errors():
    with pytest.raises(ValueError, match=r"x.shape = \(2, 2, 8, 8\): image views need"):
        image_view(torch.rand(2, 2, 8, 8), _gen())
    with pytest.raises(ValueError, match=r"data.augment.blur_sigma = \[2.0, 1.0\]: must be a pair"):
        make_augmenter("cifar10", {"blur_sigma": [2.0, 1.0]})
