"""Temperature schedules: closed forms at chosen steps, option checks, learnable τ."""

import math

import pytest
import torch

from pipeline.config.entries import validate_options
from pipeline.losses import (
    SCHEDULES,
    LearnableTemperature,
    resolve_schedule_options,
    temperature_at,
)
from pipeline.options import defaults


def _opts(name, **given):
    return resolve_schedule_options(name, given, f"temperature.{name}")


def test_constant():
    assert temperature_at("constant", 17, 100, _opts("constant", tau=0.3)) == 0.3


def test_log_anneal_follows_c_log_t_plus_2_and_clips():
    o = _opts("log_anneal", c=1.0, tau_min=0.1, tau_max=1.0)
    assert temperature_at("log_anneal", 0, 10, o) == pytest.approx(1.0)  # β = log 2 < 1 → clipped
    assert temperature_at("log_anneal", 5, 10, o) == pytest.approx(1 / math.log(7))
    assert temperature_at("log_anneal", 10**6, 10, o) == pytest.approx(0.1)  # β = log(1e6) > 10


@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_linear_and_cosine_endpoints_and_midpoint(name):
    o = _opts(name, tau_start=1.0, tau_end=0.2)
    assert temperature_at(name, 0, 11, o) == pytest.approx(1.0)
    assert temperature_at(name, 10, 11, o) == pytest.approx(0.2)
    assert temperature_at(name, 50, 11, o) == pytest.approx(0.2)  # past the end: stays
    assert temperature_at(name, 5, 11, o) == pytest.approx(0.6)  # both pass through the middle
    if name == "cosine":
        assert temperature_at(name, 2, 11, o) == pytest.approx(
            0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi * 0.2))
        )
    else:
        assert temperature_at(name, 2, 11, o) == pytest.approx(1.0 - 0.8 * 0.2)


def test_learnable_temperature_is_clip_style():
    t = LearnableTemperature(tau_init=0.07, tau_min=0.01, tau_max=1.0)
    assert t().item() == pytest.approx(0.07)
    assert t.log_inv_tau.item() == pytest.approx(math.log(1 / 0.07))
    t().backward()
    assert t.log_inv_tau.grad is not None and t.log_inv_tau.grad.item() != 0
    with torch.no_grad():
        t.log_inv_tau.fill_(50.0)
    assert t().item() == pytest.approx(0.01)
    with pytest.raises(ValueError, match="no closed form"):
        temperature_at("learnable", 0, 10, _opts("learnable"))


def test_every_schedule_resolves_with_defaults():
    for name, spec in SCHEDULES.items():
        assert _opts(name) == defaults(spec.options)
        assert spec.target in _opts(name)


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("warm", {}, "temperature.warm: unknown temperature schedule 'warm'; allowed: constant | "),
        (
            "linear",
            {"tau0": 1},
            "temperature.linear.tau0 = 1: unknown option for schedule 'linear'",
        ),
        ("constant", {"tau": -0.1},
         "temperature.constant.tau = -0.1: input should be greater than 0"),
        ("cosine", {"tau_end": "x"},
         "temperature.cosine.tau_end = 'x': input should be a valid number"),
        (
            "log_anneal",
            {"tau_min": 2.0},
            "temperature.log_anneal.tau_min = 2.0: must be < tau_max = 1.0",
        ),
        (
            "learnable",
            {"tau_init": 5.0},
            r"temperature.learnable.tau_init = 5.0: must be in \[tau_min, tau_max\]",
        ),
    ],
)
def test_bad_options_fail_with_the_key(name, given, message):
    where = "temperature" if name == "warm" else f"temperature.{name}"
    with pytest.raises(ValueError, match=message):
        if name not in SCHEDULES:
            resolve_schedule_options(name, given, where)
        validate_options(SCHEDULES[name].options, given, where, f"schedule {name!r}")


def test_bad_step():
    with pytest.raises(ValueError, match="need step >= 0"):
        temperature_at("constant", -1, 10, _opts("constant"))
