"""ResNet-18 (torchvision, random init) with any input channels and an optional small-image stem."""

from __future__ import annotations

from torch import nn


def resnet18(input_shape: tuple[int, ...], embed_dim: int, small_stem: bool = True) -> nn.Module:
    """torchvision's ``resnet18(weights=None)``: images ``(B, C, H, W)`` → ``(B, embed_dim)``.

    ``small_stem``: a 3×3 stride-1 first convolution and no max-pool (the CIFAR variant of SimCLR,
    for 8–32 pixel images); else the ImageNet 7×7 stride-2 stem. ``fc`` is a linear head
    512 → embed_dim. Initialisation draws from torch's global RNG: build inside ``seeded_init``.
    """
    import torchvision  # lazy: importing torchvision.models costs seconds

    channels = input_shape[0]
    model = torchvision.models.resnet18(weights=None, num_classes=embed_dim)
    if small_stem:
        model.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif channels != 3:
        model.conv1 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    if small_stem or channels != 3:  # a replaced stem gets torchvision's own conv initialisation
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model
