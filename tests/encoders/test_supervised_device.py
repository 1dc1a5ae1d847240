"""Supervised head and loss against a loop from the formula; device, precision, memory format."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest
import torch
from torch import nn

from pipeline.encoders import autocast_context, classifier_head, pick_device, supervised_loss
from pipeline.encoders.device import (
    AUTO_MARGIN,
    ComputeMode,
    apply_compute_mode,
    candidates,
    resolve_compute_mode,
)

CPU = torch.device("cpu")


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


def test_pick_device():
    auto = pick_device("auto")
    assert auto.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert pick_device("cpu") == CPU
    with pytest.raises(ValueError, match=r"device = 'tpu': allowed"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError,
                           match=r"device = 'cuda': CUDA is not available here \(node "):
            pick_device("cuda")


def test_autocast_context_on_cpu():
    with autocast_context(CPU, "bfloat16"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast_context(CPU, "float32"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with pytest.raises(ValueError,
                       match=r"train.precision = 'fp16': allowed: \['float32', 'bfloat16'\]"):
        autocast_context(CPU, "fp16")


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))


def _mode(precision: str, memory_format: str) -> ComputeMode:
    return ComputeMode(precision, memory_format, (precision, memory_format), "params", "cpu")


def _watch_conv(net: nn.Module) -> dict[str, object]:
    seen: dict[str, object] = {}

    def hook(module, args, output):
        seen["in_channels_last"] = args[0].is_contiguous(memory_format=torch.channels_last)
        seen["out_dtype"] = output.dtype
    net[0].register_forward_hook(hook)
    return seen


def test_bf16_and_channels_last_apply_to_training_forwards_only():
    x = torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(1))
    plain, net = _net(), _net()
    apply_compute_mode(net, _mode("bfloat16", "channels_last"), CPU)
    seen = _watch_conv(net)
    out = net.train()(x)
    assert out.dtype == torch.float32  # cast back: the loss is computed in float32
    assert seen == {"in_channels_last": True, "out_dtype": torch.bfloat16}
    assert net[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert not torch.is_autocast_enabled("cpu")  # the context was left
    ref = plain.train()(x)
    assert torch.allclose(out, ref, rtol=5e-2, atol=5e-2)  # bf16: ~3 significant digits
    # eval mode (held-out embeddings, later stages): float32 on the float32 weights
    net.eval()
    plain.load_state_dict(net.state_dict())
    z = net(x)
    assert seen["out_dtype"] == torch.float32
    # the same float32 arithmetic up to the layout's kernel order (oneDNN NHWC vs NCHW)
    assert torch.allclose(z, plain.eval()(x), rtol=1e-5, atol=1e-6)
    assert {k: v.dtype for k, v in net.state_dict().items()} == \
        {k: v.dtype for k, v in plain.state_dict().items()}


def test_autocast_is_left_when_the_forward_raises():
    net = _net()
    apply_compute_mode(net, _mode("bfloat16", "contiguous"), CPU)
    with pytest.raises(RuntimeError):
        net.train()(torch.randn(2, 4, 6, 6))  # wrong channel count
    assert not torch.is_autocast_enabled("cpu")


def test_float32_contiguous_adds_nothing():
    net = _net()
    apply_compute_mode(net, _mode("float32", "contiguous"), CPU)
    assert not net._forward_pre_hooks and not net._forward_hooks


def test_candidates_put_the_default_first_and_skip_layouts_of_vectors():
    assert candidates("auto", "auto", True, CPU) == [
        ("float32", "contiguous"), ("float32", "channels_last"),
        ("bfloat16", "contiguous"), ("bfloat16", "channels_last")]
    assert candidates("auto", "auto", False, CPU) == [("float32", "contiguous"),
                                                      ("bfloat16", "contiguous")]
    assert candidates("bfloat16", "auto", True, CPU) == [("bfloat16", "contiguous"),
                                                         ("bfloat16", "channels_last")]
    with pytest.raises(ValueError, match=r"train.memory_format = 'nhwc': allowed: "):
        candidates("auto", "nhwc", True, CPU)


def _sleepy_step(seconds: dict[str, float]):
    """Steps whose cost is a sleep: far apart, so the choice does not depend on the machine."""
    def step(precision: str, memory_format: str):
        return lambda: time.sleep(seconds[precision])
    return step


def test_auto_takes_a_setting_only_when_clearly_faster():
    fast_bf16 = resolve_compute_mode("auto", "contiguous", CPU,
                                     _sleepy_step({"float32": 0.02, "bfloat16": 0.002}), True, 64)
    assert (fast_bf16.precision, fast_bf16.chosen_by) == ("bfloat16", "measured")
    assert set(fast_bf16.images_per_second) == {"float32/contiguous", "bfloat16/contiguous"}
    slow_bf16 = resolve_compute_mode("auto", "contiguous", CPU,
                                     _sleepy_step({"float32": 0.002, "bfloat16": 0.02}), True, 64)
    assert slow_bf16.precision == "float32"
    assert AUTO_MARGIN > 0  # a near-tie keeps the default (float32)
    fixed = resolve_compute_mode("float32", "contiguous", CPU, _sleepy_step({}), True, 64)
    assert (fixed.chosen_by, fixed.images_per_second) == ("params", {})
    frozen = resolve_compute_mode("auto", "auto", CPU, None, True, 64)
    assert (frozen.precision, frozen.memory_format, frozen.chosen_by) == \
        ("float32", "contiguous", "not applicable")
    assert frozen.as_record()["requested"] == {"precision": "auto", "memory_format": "auto"}


def test_train_cell_records_what_auto_chose(tiny_params):
    from pipeline.config import expand, from_mapping
    from pipeline.datasets import load_dataset
    from pipeline.train import train_cell

    tiny_params["train"].update(precision="auto", memory_format="auto", epochs=1)
    tiny_params["grid"]["k"] = [4]
    params = from_mapping(tiny_params)
    cell = expand(params)[0]
    d = params.data
    dataset = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    result = train_cell(cell, dataset)
    mode = result.compute
    assert mode is not None and mode.chosen_by == "measured"
    assert mode.memory_format == "contiguous"  # vector inputs have no channels_last
    assert set(mode.images_per_second) == {"float32/contiguous", "bfloat16/contiguous"}
    assert mode.precision in ("float32", "bfloat16")
    # the weights stay float32 and the result is reproducible in the setting that ran
    assert all(p.dtype == torch.float32 for p in result.model.parameters())
    again = replace(cell, train=replace(cell.train, precision=mode.precision,
                                        memory_format=mode.memory_format))
    rerun = train_cell(again, dataset)  # same cell id: same random streams
    assert rerun.history[-1].loss == result.history[-1].loss


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_autocast_on_cuda():
    dev = pick_device("auto")
    with autocast_context(dev, "bfloat16"):
        assert (torch.ones(2, 2, device=dev) @ torch.ones(2, 2, device=dev)).dtype == torch.bfloat16
    net = _net().to(dev)
    apply_compute_mode(net, _mode("bfloat16", "channels_last"), dev)
    assert net.train()(torch.randn(4, 3, 6, 6, device=dev)).dtype == torch.float32
