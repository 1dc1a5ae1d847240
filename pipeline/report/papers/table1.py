"""Betser et al. (2026), Table 1, typed once (SPEC.md §2): the published settings, their values
of the registry's statistics with a Gaussian null (CV, AD Avg, AD pass, DP Avg, DP pass) and,
for the synthetic rows, the protocol they were trained with (:data:`SYNTHETIC_PROTOCOL`);
:func:`protocol_points` says where a grid's cells depart from it.
:mod:`pipeline.report.papers.side_by_side` (the synthetic rows) and
:mod:`pipeline.report.papers.image_rows` (the CIFAR-10 rows, whose protocol is its own
point-by-point check) read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS

# Table 1's columns, in their order: the registry's statistics with a Gaussian null
STATS = tuple(m.name for m in METRICS.values() if "null_" in m.families)
STAT_LABELS = {s: METRICS[s].label for s in STATS}


@dataclass(frozen=True)
class Requirement:
    """One point of a published protocol: the cell config's dotted ``key`` (read from the board's
    column of that name where it is a grid axis, else from the cells' configs), the published
    ``values`` (any of them; ``span``: any value from the first to the last) and how a value is
    shown (``shown``, with ``{}`` for it)."""

    name: str
    key: str
    values: tuple[Any, ...]
    shown: str
    span: bool = False

    def allows(self, value: Any) -> bool:
        if self.span:
            return bool(self.values[0] <= value <= self.values[-1])
        return value in self.values

    def text(self, values: Sequence[Any]) -> str:
        """``shown`` with the values: "d 32–256" (more than two numbers, or a span), "τ 0.1/0.2"."""
        return self.shown.format(_values(values, self.span))


def _value(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    return f"{v:,}".replace(",", " ") if isinstance(v, int) and v >= 10000 else f"{v:g}"


def _values(values: Sequence[Any], span: bool = False) -> str:
    vs = list(values)
    if span or (len(vs) > 2 and all(isinstance(v, int | float) for v in vs)):
        return f"{_value(min(vs))}–{_value(max(vs))}"
    return "/".join(_value(v) for v in vs)


# Their synthetic setting (SPEC.md §2): Laplace(0, 1) inputs of dimension 1024, 20k train / 5k
# test, linear encoder to d ∈ {32, 64, 128, 256}, batch 8–128, τ ∈ {0.1, 0.2}, NT-Xent with
# in-batch negatives, Adam lr 1e-3, 150 epochs; the Gaussian-mixture row is taken to share it.
SYNTHETIC_PROTOCOL = (
    Requirement("d", "embed_dim", (32, 64, 128, 256), "d {}"),
    Requirement("n", "n", (20000,), "n {}"),
    Requirement("test n", "data.n_heldout", (5000,), "test n {}"),
    Requirement("input dim", "data.options.input_dim", (1024,), "input dim {}"),
    Requirement("epochs", "train.epochs", (150,), "{} epochs"),
    Requirement("batch size", "train.batch_size", (8, 128), "batch {}", span=True),
    Requirement("tau", "tau", (0.1, 0.2), "τ {}"),
    Requirement("tau schedule", "tau_schedule", ("constant",), "{} τ"),
    Requirement("loss", "loss", ("nt_xent",), "{}"),
    Requirement("negatives", "train.negatives", ("in_batch",), "{} negatives"),
    Requirement("optimiser", "train.optimizer", ("adam",), "{}"),
    Requirement("lr", "train.lr", (0.001,), "lr {}"),
)


@dataclass(frozen=True)
class ProtocolPoint:
    """A :class:`Requirement` against this run: the published text, the distinct values the
    cells have (``seen``; empty: not known, no column and no config) and whether any of them
    lies outside the published ones."""

    name: str
    published: str
    seen: tuple[Any, ...]
    this_run: str
    differs: bool


def _config_value(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def protocol_points(protocol: Iterable[Requirement], cells: pd.DataFrame,
                    configs: Sequence[Mapping[str, Any]]) -> tuple[ProtocolPoint, ...]:
    """Each point of ``protocol`` against ``cells`` (the board's rows) and their resolved
    ``configs`` (``cell.json``'s ``config``; may be empty): the values seen and whether they
    depart from the published ones."""
    out = []
    for r in protocol:
        column = r.key.rsplit(".", 1)[-1]
        if column in GRID_AXES and column in cells:
            raw = cells[column].dropna().tolist()
        else:
            raw = [v for c in configs if (v := _config_value(c, r.key)) is not None]
        seen = tuple(sorted(set(raw), key=lambda v: (str(type(v)), v)))
        out.append(ProtocolPoint(r.name, r.text(r.values), seen,
                                 r.text(seen) if seen else "",
                                 any(not r.allows(v) for v in seen)))
    return tuple(out)


def differs_text(points: Sequence[ProtocolPoint]) -> str:
    """"published: d 32–256, n 20 000, 150 epochs; this run: d 16, n 2000, 10 epochs" over the
    points that differ ("" when none does); the points this run cannot tell are named after."""
    off = [p for p in points if p.differs]
    unknown = [p.name for p in points if not p.seen]
    text = ("published: " + ", ".join(p.published for p in off) + "; this run: "
            + ", ".join(p.this_run for p in off)) if off else ""
    if unknown:
        text += ("; " if text else "") + "not known for this run: " + ", ".join(unknown)
    return text


@dataclass(frozen=True)
class Published:
    setting: str
    values: Mapping[str, float]
    protocol: tuple[Requirement, ...] = ()  # empty: checked elsewhere (the image rows)


# Table 1, unnormalised embeddings. Key: (data.name, arch, objective).
BETSER_TABLE1: dict[tuple[str, str, str], Published] = {
    ("laplace", "linear", "contrastive"): Published(
        "Laplace, linear encoder", {"cv": 0.08, "ad_mean": 0.38, "ad_pass_frac": 1.0,
                                    "dp_p_mean": 0.49, "dp_pass_frac": 1.0},
        SYNTHETIC_PROTOCOL),
    ("gaussian_mixture", "linear", "contrastive"): Published(
        "Gaussian mixture, linear", {"cv": 0.08, "ad_mean": 0.39, "ad_pass_frac": 1.0,
                                     "dp_p_mean": 0.46, "dp_pass_frac": 1.0},
        SYNTHETIC_PROTOCOL),
    ("cifar10", "resnet18", "supervised"): Published(
        "CIFAR-10 ResNet-18 supervised", {"cv": 0.5, "ad_mean": 3.3, "ad_pass_frac": 0.062,
                                          "dp_p_mean": 0.041, "dp_pass_frac": 0.039}),
    ("cifar10", "resnet18", "contrastive"): Published(
        "CIFAR-10 ResNet-18 contrastive", {"cv": 0.09, "ad_mean": 0.43, "ad_pass_frac": 0.961,
                                           "dp_p_mean": 0.39, "dp_pass_frac": 0.945}),
}
