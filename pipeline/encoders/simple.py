"""Linear and MLP encoders for vector inputs."""

from __future__ import annotations

from torch import nn


def linear(input_dim: int, embed_dim: int, bias: bool = False) -> nn.Module:
    """z = W x (+ b): the encoder of Betser et al.'s synthetic setting."""
    return nn.Linear(input_dim, embed_dim, bias=bias)


def mlp(input_dim: int, embed_dim: int, hidden: list[int], bias: bool = True) -> nn.Module:
    """Linear → ReLU blocks of the given widths, then a linear map to ``embed_dim``."""
    layers: list[nn.Module] = []
    width = input_dim
    for h in hidden:
        layers += [nn.Linear(width, h, bias=bias), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, embed_dim, bias=bias))
    return nn.Sequential(*layers)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
