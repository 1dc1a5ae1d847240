"""Temperature schedules over training steps (SPEC.md §1; Chaudhry 2026, arXiv 2603.12552).

``temperature_at`` gives τ at step t for the closed-form schedules; the learnable one is a
module (:class:`LearnableTemperature`) whose value the optimiser moves. Progress is
p = t / (total_steps − 1) clipped to [0, 1], so the last step reaches ``tau_end``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import torch
from annotated_types import Gt
from torch import Tensor, nn

from pipeline.options import OptionError, fill, option

Temperature = Annotated[float, Gt(0)]


def _ordered(low: str, high: str, options: Any) -> None:
    if not getattr(options, low) < getattr(options, high):
        raise OptionError(low, getattr(options, low),
                          f"must be < {high} = {getattr(options, high)!r}")


@dataclass(frozen=True)
class ConstantOptions:
    tau: Temperature = option(0.1, "τ at every step")


@dataclass(frozen=True)
class LogAnnealOptions:
    """β(t) = 1/τ(t) = c·log(t + 2), clipped to [1/tau_max, 1/tau_min]."""

    c: Annotated[float, Gt(0)] = option(2.0, "slope of the inverse temperature in log(t + 2)")
    tau_min: Temperature = option(0.05, "the smallest τ (the schedule's target)")
    tau_max: Temperature = option(1.0, "the largest τ")

    def __post_init__(self) -> None:
        _ordered("tau_min", "tau_max", self)


@dataclass(frozen=True)
class RampOptions:
    """Linear or cosine from tau_start at the first step to tau_end at the last."""

    tau_start: Temperature = option(1.0, "τ at the first step")
    tau_end: Temperature = option(0.1, "τ at the last step (the schedule's target)")


@dataclass(frozen=True)
class LearnableOptions:
    """CLIP: log(1/τ) is a parameter, clamped so that τ stays in [tau_min, tau_max]."""

    tau_init: Temperature = option(0.07, "τ at the start (the schedule's target)")
    tau_min: Temperature = option(0.01, "lower clamp of τ")
    tau_max: Temperature = option(1.0, "upper clamp of τ")

    def __post_init__(self) -> None:
        _ordered("tau_min", "tau_max", self)
        if not self.tau_min <= self.tau_init <= self.tau_max:
            raise OptionError("tau_init", self.tau_init,
                              f"must be in [tau_min, tau_max] = [{self.tau_min}, {self.tau_max}]")


@dataclass(frozen=True)
class ScheduleSpec:
    """A registered schedule: its options and the one the grid's τ sets (its target)."""

    options: type
    target: str


SCHEDULES: dict[str, ScheduleSpec] = {
    "constant": ScheduleSpec(ConstantOptions, "tau"),
    "log_anneal": ScheduleSpec(LogAnnealOptions, "tau_min"),
    "linear": ScheduleSpec(RampOptions, "tau_end"),
    "cosine": ScheduleSpec(RampOptions, "tau_end"),
    "learnable": ScheduleSpec(LearnableOptions, "tau_init"),
}


def resolve_schedule_options(
    name: str, given: Mapping[str, Any] | None, where: str
) -> dict[str, Any]:
    """Every option of schedule ``name``: defaults overlaid with ``given``, cross-rules checked.

    Values are validated by the params schema (``pipeline.config``); here unknown names and keys
    and the rules across options (tau_min < tau_max, ...) raise ``ValueError`` naming ``where``.
    """
    if name not in SCHEDULES:
        raise ValueError(
            f"{where}: unknown temperature schedule {name!r}; allowed: {' | '.join(SCHEDULES)}"
        )
    return fill(SCHEDULES[name].options, given, where)


def _progress(step: int, total_steps: int) -> float:
    return min(max(step / max(total_steps - 1, 1), 0.0), 1.0)


def temperature_at(schedule: str, step: int, total_steps: int, options: Mapping[str, Any]) -> float:
    """τ at ``step`` (0-based) of ``total_steps`` for a closed-form schedule.

    ``options`` as returned by :func:`resolve_schedule_options`. ``learnable`` has no closed
    form: build a :class:`LearnableTemperature` instead.
    """
    if step < 0 or total_steps < 1:
        raise ValueError(  # one f-string: two would change every cell's code fingerprint
            f"temperature_at: step = {step}, total_steps = {total_steps}: need step >= 0, total_steps >= 1"  # noqa: E501
        )
    o = options
    if schedule == "constant":
        return float(o["tau"])
    if schedule == "log_anneal":
        # The options are Any. A typed rewrite here would change every cell's code fingerprint
        # (each cached cell would retrain once, to the same values), so the check is waived.
        beta = o["c"] * math.log(step + 2)
        return 1.0 / min(max(beta, 1.0 / o["tau_max"]),  # type: ignore[no-any-return]
                         1.0 / o["tau_min"])
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
