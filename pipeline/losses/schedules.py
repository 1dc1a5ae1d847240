"""Temperature schedules over training steps (SPEC.md §1; Chaudhry 2026, arXiv 2603.12552).

``temperature_at`` gives τ at step t for the closed-form schedules; the learnable one is a
module (:class:`LearnableTemperature`) whose value the optimiser moves. Progress is
p = t / (total_steps − 1) clipped to [0, 1], so the last step reaches ``tau_end``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

SCHEDULES: dict[str, dict[str, Any]] = {
    "constant": {"tau": 0.1},
    # β(t) = 1/τ(t) = c·log(t + 2), clipped to [1/tau_max, 1/tau_min]
    "log_anneal": {"c": 2.0, "tau_min": 0.05, "tau_max": 1.0},
    "linear": {"tau_start": 1.0, "tau_end": 0.1},
    "cosine": {"tau_start": 1.0, "tau_end": 0.1},
    # CLIP: log(1/τ) is a parameter, clamped so that τ stays in [tau_min, tau_max]
    "learnable": {"tau_init": 0.07, "tau_min": 0.01, "tau_max": 1.0},
}

_POSITIVE = {"tau", "c", "tau_min", "tau_max", "tau_start", "tau_end", "tau_init"}


def resolve_schedule_options(
    name: str, given: Mapping[str, Any] | None, where: str
) -> dict[str, Any]:
    """Defaults of schedule ``name`` overlaid with ``given``; fails naming ``where``.

    Unknown schedule or option, a non-positive temperature or constant, or tau_min ≥ tau_max
    raise ``ValueError`` with the dotted key, the value and what is allowed.
    """
    if name not in SCHEDULES:
        raise ValueError(
            f"{where}: unknown temperature schedule {name!r}; allowed: {' | '.join(SCHEDULES)}"
        )
    given = dict(given or {})
    defaults = SCHEDULES[name]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(
            f"{where}.{unknown[0]} = {given[unknown[0]]!r}: unknown option for schedule {name!r}; "
            f"allowed: {sorted(defaults) or 'none'}"
        )
    options = {**defaults, **given}
    for key, value in options.items():
        if key in _POSITIVE and (
            isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
        ):
            raise ValueError(f"{where}.{key} = {value!r}: must be a number > 0")
    if "tau_min" in options and options["tau_min"] >= options["tau_max"]:
        raise ValueError(
            f"{where}.tau_min = {options['tau_min']!r}: must be < tau_max = {options['tau_max']!r}"
        )
    if name == "learnable" and not options["tau_min"] <= options["tau_init"] <= options["tau_max"]:
        raise ValueError(
            f"{where}.tau_init = {options['tau_init']!r}: must be in "
            f"[tau_min, tau_max] = [{options['tau_min']}, {options['tau_max']}]"
        )
    return options


def _progress(step: int, total_steps: int) -> float:
    return min(max(step / max(total_steps - 1, 1), 0.0), 1.0)


def temperature_at(schedule: str, step: int, total_steps: int, options: Mapping[str, Any]) -> float:
    """τ at ``step`` (0-based) of ``total_steps`` for a closed-form schedule.

    ``options`` as returned by :func:`resolve_schedule_options`. ``learnable`` has no closed
    form: build a :class:`LearnableTemperature` instead.
    """
    if step < 0 or total_steps < 1:
        raise ValueError(
            f"temperature_at: step = {step}, total_steps = {total_steps}: need step >= 0, total_steps >= 1"
        )
    o = options
    if schedule == "constant":
        return float(o["tau"])
    if schedule == "log_anneal":
        beta = o["c"] * math.log(step + 2)
        return 1.0 / min(max(beta, 1.0 / o["tau_max"]), 1.0 / o["tau_min"])
    p = _progress(step, total_steps)
    if schedule == "linear":
        return float(o["tau_start"] + (o["tau_end"] - o["tau_start"]) * p)
    if schedule == "cosine":
        return float(
            o["tau_end"] + (o["tau_start"] - o["tau_end"]) * 0.5 * (1 + math.cos(math.pi * p))
        )
    if schedule == "learnable":
        raise ValueError(
            "temperature_at: schedule 'learnable' has no closed form; use LearnableTemperature"
        )
    raise ValueError(
        f"temperature_at: unknown schedule {schedule!r}; allowed: {' | '.join(SCHEDULES)}"
    )


class LearnableTemperature(nn.Module):
    """CLIP-style temperature: parameter ``log_inv_tau`` = log(1/τ), clamped in ``forward``.

    ``forward()`` returns τ as a 0-d tensor in [tau_min, tau_max]; the clamp stops the gradient
    at the bounds (CLIP clamps the logit scale at 100, i.e. tau_min = 0.01).
    """

    def __init__(self, tau_init: float = 0.07, tau_min: float = 0.01, tau_max: float = 1.0) -> None:
        super().__init__()
        self.log_inv_tau = nn.Parameter(torch.tensor(math.log(1.0 / tau_init)))
        self.lo = math.log(1.0 / tau_max)
        self.hi = math.log(1.0 / tau_min)

    def forward(self) -> Tensor:
        return torch.exp(-self.log_inv_tau.clamp(self.lo, self.hi))
