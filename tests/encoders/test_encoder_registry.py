"""Encoder registry: shapes, option errors, seeded initial weights, ResNet-18 stems."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pipeline.config.entries import validate_options
from pipeline.encoders import (
    ENCODERS,
    count_parameters,
    make_encoder,
    resolve_encoder_options,
)
from pipeline.encoders.features import split_encoder
from pipeline.seeding import seeded_init


@pytest.mark.parametrize("arch", sorted(ENCODERS))
def test_every_option_has_a_default_and_a_check(arch):
    spec = ENCODERS[arch]
    assert set(spec.kind) <= {"vector", "image"}
    given = {"weights": "w.pt"} if arch in ("clip", "dino") else {}
    assert validate_options(spec.options, given, "a", arch) == {**spec.defaults, **given}


@pytest.mark.parametrize("arch,shape", [("linear", (10,)), ("linear", (1, 8, 8)), ("mlp", (10,)),
                                        ("mlp", (3, 4, 4)), ("resnet18", (1, 28, 28)),
                                        ("resnet18", (3, 8, 8))])
def test_output_shapes(arch, shape):
    model = make_encoder(arch, shape, 6, {})
    assert model(torch.rand(2, *shape)).shape == (2, 6)


def test_linear_is_torchs_linear_under_the_same_seed():
    with seeded_init(0, "x"):
        new = make_encoder("linear", (12,), 4, {"bias": True})
    with seeded_init(0, "x"):
        old = nn.Linear(12, 4, bias=True)
    assert isinstance(new, nn.Linear)
    for a, b in zip(new.parameters(), old.parameters(), strict=True):
        assert torch.equal(a, b)


def test_initial_weights_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    builds = []
    for seed in (1, 1, 2):
        with seeded_init(seed, "resnet18"):
            builds.append(make_encoder("resnet18", (1, 28, 28), 8, {}).state_dict())
    assert torch.equal(state, torch.random.get_rng_state())
    assert all(torch.equal(builds[0][k], builds[1][k]) for k in builds[0])
    assert not torch.equal(builds[0]["conv1.weight"], builds[2]["conv1.weight"])


def test_resnet18_stems():
    small = make_encoder("resnet18", (1, 28, 28), 5, {"small_stem": True})
    assert small.conv1.kernel_size == (3, 3) and small.conv1.stride == (1, 1)
    assert small.conv1.in_channels == 1 and isinstance(small.maxpool, nn.Identity)
    assert small.fc.out_features == 5 and small(torch.rand(2, 1, 28, 28)).shape == (2, 5)
    big = make_encoder("resnet18", (2, 64, 64), 5, {"small_stem": False})
    assert big.conv1.kernel_size == (7, 7) and big.conv1.in_channels == 2
    assert isinstance(big.maxpool, nn.MaxPool2d) and big(torch.rand(1, 2, 64, 64)).shape == (1, 5)
    assert count_parameters(small) == sum(p.numel() for p in small.parameters())


@pytest.mark.parametrize("small_stem", [True, False])
def test_resnet18_width_scales_every_stage(small_stem):
    """A narrow ResNet-18 is torchvision's network with every channel count scaled by
    width / 64: the same modules, strides and shortcuts, each convolution's weight shape that of
    torchvision's with its channels divided by 4 (the first convolution's input channels are the
    image's). Width 64 is torchvision's network itself."""
    import torchvision

    reference = {n: m for n, m in torchvision.models.resnet18(weights=None).named_modules()}
    narrow = make_encoder("resnet18", (1, 28, 28), 7, {"width": 16, "small_stem": small_stem})
    convs = {n: m for n, m in narrow.named_modules() if isinstance(m, nn.Conv2d)}
    assert set(convs) == {n for n, m in reference.items() if isinstance(m, nn.Conv2d)}
    for name, conv in convs.items():
        ref = reference[name]
        assert conv.out_channels == ref.out_channels // 4, name
        assert conv.in_channels == (1 if name == "conv1" else ref.in_channels // 4), name
        assert conv.stride == ref.stride or (name == "conv1" and small_stem), name
    assert narrow.fc.in_features == 128 and narrow.fc.out_features == 7
    bn = [m for m in narrow.modules() if isinstance(m, nn.BatchNorm2d)]
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in bn)
    assert narrow(torch.rand(2, 1, 28, 28)).shape == (2, 7)
    assert split_encoder("resnet18", narrow)(torch.rand(2, 1, 28, 28))["backbone"].shape == (2, 128)
    with seeded_init(0, "resnet18"):
        default = make_encoder("resnet18", (1, 28, 28), 7, {}).state_dict()
    with seeded_init(0, "resnet18"):
        standard = make_encoder("resnet18", (1, 28, 28), 7, {"width": 64}).state_dict()
    assert all(torch.equal(default[k], standard[k]) for k in default)


def test_option_and_shape_errors():
    def check(arch, given, where=None):
        validate_options(ENCODERS[arch].options, given, where or f"arch_options.{arch}", arch)

    with pytest.raises(ValueError,
                       match=r"arch_options.mlp.hidden\[0\] = 0: input should be greater"):
        check("mlp", {"hidden": [0]})
    with pytest.raises(ValueError, match=r"grid.x.depth = 3: unknown option; allowed: \["):
        resolve_encoder_options("linear", {"depth": 3}, "grid.x")
    with pytest.raises(ValueError,
                       match=r"arch_options.clip.weights = None: a path to a local weights"):
        check("clip", {})
    with pytest.raises(ValueError,
                       match=r"arch_options.dino.head = 'mlp': input should be 'linear' or 'none'"):
        check("dino", {"weights": "w.pt", "head": "mlp"})
    with pytest.raises(ValueError, match=r"input_shape = \(8,\): resnet18 takes image inputs"):
        make_encoder("resnet18", (8,), 4, {})
    with pytest.raises(ValueError, match=r"grid.arch = 'vgg': unknown architecture; allowed: \["):
        make_encoder("vgg", (8,), 4, {})
