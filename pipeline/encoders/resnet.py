"""ResNet-18 (torchvision, random init) with any input channels, an optional small-image stem and
an optional width."""

from __future__ import annotations

from torch import nn

STANDARD_WIDTH = 64  # torchvision's ResNet-18: stages of 64, 128, 256, 512 channels


def resnet18(input_shape: tuple[int, ...], embed_dim: int, small_stem: bool = True,
             width: int = STANDARD_WIDTH) -> nn.Module:
    """torchvision's ``resnet18(weights=None)``: images ``(B, C, H, W)`` → ``(B, embed_dim)``.

    ``small_stem``: a 3×3 stride-1 first convolution and no max-pool (the CIFAR variant of SimCLR,
    for 8–32 pixel images); else the ImageNet 7×7 stride-2 stem. ``width``: channels of the stem
    and the first stage; the stages have ``width``, 2, 4 and 8 × ``width`` channels (64 is
    torchvision's network; 16 costs about 1/16 of its multiply-adds, as a convolution's cost
    grows with the square of its channels). ``fc`` is a linear head 8·width → embed_dim, reading
    the pooled features. Initialisation draws from torch's global RNG: build inside
    ``seeded_init``.
    """
    import torchvision  # lazy: importing torchvision.models costs seconds

    channels = input_shape[0]
    model = torchvision.models.resnet18(weights=None, num_classes=embed_dim)
    if width != STANDARD_WIDTH:
        _narrow(model, width, embed_dim)
    if small_stem:
        model.conv1 = nn.Conv2d(channels, width, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif channels != 3:
        model.conv1 = nn.Conv2d(channels, width, kernel_size=7, stride=2, padding=3, bias=False)
    if small_stem or channels != 3:  # a replaced stem gets torchvision's own conv initialisation
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model


def _narrow(model: nn.Module, width: int, embed_dim: int) -> None:
    """Rebuild ``model``'s stem, four stages and head at ``width`` with torchvision's own
    ``_make_layer`` (the same blocks, strides and downsampling shortcuts) and its initialisation:
    Kaiming-normal convolutions (fan out), batch norms at weight 1 and bias 0, the head as
    ``nn.Linear``'s default."""
    import torchvision

    block = torchvision.models.resnet.BasicBlock
    model.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
    model.bn1 = nn.BatchNorm2d(width)
    model.inplanes = width  # type: ignore[assignment]  # a torchvision ResNet (mypy: Module)
    for i in range(4):
        stage = model._make_layer(  # type: ignore[operator]  # ResNet._make_layer
            block, width * 2 ** i, 2, stride=1 if i == 0 else 2)
        setattr(model, f"layer{i + 1}", stage)
    model.fc = nn.Linear(8 * width, embed_dim)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)
