"""Supervised head and loss against a loop from the formula; device and autocast helpers."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline.encoders import autocast_context, classifier_head, pick_device, supervised_loss


def test_classifier_head_and_cross_entropy_against_a_loop():
    g = torch.Generator().manual_seed(0)
    head = classifier_head(6, 4)
    assert head(torch.randn(3, 6, generator=g)).shape == (3, 4)
    logits = torch.randn(5, 4, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 3, 1, 1, 2], dtype=torch.int32)
    expected = sum(-logits[i, labels[i]] + math.log(sum(math.exp(v) for v in logits[i].tolist()))
                   for i in range(5)) / 5
    assert supervised_loss(logits, labels).item() == pytest.approx(float(expected), rel=1e-12)
    with pytest.raises(ValueError, match=r"n_classes = 0: must be an integer >= 1"):
        classifier_head(6, 0)


def test_pick_device_and_autocast():
    auto = pick_device("auto")
    assert auto.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"device = 'tpu': allowed"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device = 'cuda': CUDA is not available"):
            pick_device("cuda")
    with autocast_context(torch.device("cpu"), bf16=True):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_autocast_on_cuda():
    dev = pick_device("auto")
    with autocast_context(dev, bf16=True):
        assert (torch.ones(2, 2, device=dev) @ torch.ones(2, 2, device=dev)).dtype == torch.bfloat16
