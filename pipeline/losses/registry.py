"""Names → loss functions, with the options each accepts (``grid.loss`` / ``loss_options``).

Every loss is called through one adapter signature, ``fn(batch, tau, options) -> scalar``, so the
training loop needs no per-loss branches. ``options`` holds exactly the keys of ``defaults``
(the config layer fills defaults and rejects unknown keys before any work starts, via
:func:`resolve_options`, whose ``where`` prefix, e.g. ``"loss_options.weince"``, names the key in
every error).

Two-view losses on labels (supcon, soft_supcon, y_aware, xclr) concatenate anchor and positive
into 2B samples with the labels repeated, so each anchor's other view is always a positive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from pipeline.losses.dcl import dcl
from pipeline.losses.infonce import infonce, nt_xent
from pipeline.losses.synco import SYNTHETIC_COUNTS, synco_loss, synthetic_negatives
from pipeline.losses.weighted import soft_supcon, supcon, xclr_two_views, y_aware_two_views
from pipeline.losses.weince import weince


@dataclass(frozen=True)
class LossBatch:
    """Encoder outputs for one training step (raw, not normalised).

    anchor, positive: ``(B, d)``; negatives: ``(B, k, d)`` (independent draws or in-batch
    picks, built by the training loop); labels: ``(B,)`` or ``None`` for unlabelled data
    (class ids for supcon/soft_supcon, continuous ``(B,)``/``(B, m)`` values for y_aware).
    queue: ``(K, d)`` MoCo keys for synco (``None``: batch.negatives stand in);
    generator: CPU generator for draws inside a loss (synco); similarity: ``(B, B)`` X-CLR graph;
    step: the training step (synco's warm-up).
    """

    anchor: Tensor
    positive: Tensor
    negatives: Tensor | None = None
    labels: Tensor | None = None
    queue: Tensor | None = None
    generator: torch.Generator | None = None
    similarity: Tensor | None = None
    step: int | None = None


LossFn = Callable[[LossBatch, Any, Mapping[str, Any]], Tensor]
Validator = Callable[[Mapping[str, Any], str], None]


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: its adapter, allowed options with defaults, and what it needs.

    ``validate(options, where)`` raises ValueError naming ``where.option``, the value and what
    is allowed.
    """

    fn: LossFn
    defaults: Mapping[str, Any] = field(default_factory=dict)
    needs_labels: bool = False
    needs_negatives: bool = True  # uses batch.negatives (the grid's k)
    validate: Validator | None = None


# --- option checks ------------------------------------------------------------------------


def _number(
    options: Mapping[str, Any],
    key: str,
    where: str,
    lo: float,
    lo_open: bool,
    hi: float | None = None,
) -> None:
    v = options[key]
    ok = isinstance(v, int | float) and not isinstance(v, bool)
    if ok:
        ok = (v > lo if lo_open else v >= lo) and (hi is None or v <= hi)
    if not ok:
        bound = f"{'>' if lo_open else '>='} {lo}" + (f" and <= {hi}" if hi is not None else "")
        raise ValueError(f"{where}.{key} = {v!r}: must be a number {bound}")


def _count(options: Mapping[str, Any], key: str, where: str, lo: int) -> None:
    v = options[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{where}.{key} = {v!r}: must be an integer >= {lo}")


def _validate_weince(o: Mapping[str, Any], where: str) -> None:
    if o["beta"] not in ("fixed", "fitted"):
        raise ValueError(f"{where}.beta = {o['beta']!r}: allowed fixed | fitted")
    for key in ("kappa_rho", "kappa_aic"):
        _number(o, key, where, 0.0, lo_open=True)
    _number(o, "margin_aic", where, float("-inf"), lo_open=True)
    _number(o, "rho_quantile", where, 0.0, lo_open=False, hi=1.0)
    _number(o, "tail_frac", where, 0.0, lo_open=True, hi=1.0)


def _validate_synco(o: Mapping[str, Any], where: str) -> None:
    _count(o, "hardest", where, 1)
    _count(o, "warmup_steps", where, 0)
    _count(o, "queue_size", where, 0)
    _number(o, "momentum", where, 0.0, lo_open=False, hi=1.0)
    for kind in SYNTHETIC_COUNTS:
        _count(o, f"n_{kind}", where, 0)
    _number(o, "alpha_max", where, 0.0, lo_open=False, hi=1.0)
    _number(o, "beta_max", where, 1.0, lo_open=False)
    for key in ("sigma", "delta", "eta"):
        _number(o, key, where, 0.0, lo_open=False)


def _positive(*keys: str) -> Validator:
    def check(o: Mapping[str, Any], where: str) -> None:
        for key in keys:
            _number(o, key, where, 0.0, lo_open=True)

    return check


# --- adapters -----------------------------------------------------------------------------


def _negatives(batch: LossBatch) -> Tensor:
    if batch.negatives is None:
        raise ValueError("this loss needs batch.negatives (B, k, d)")
    return batch.negatives


def _labels(batch: LossBatch) -> Tensor:
    if batch.labels is None:
        raise ValueError("this loss needs batch.labels")
    return batch.labels


def _two_views(batch: LossBatch) -> tuple[Tensor, Tensor]:
    """(2B, d) samples and (2B, ...) labels: anchor views then positive views."""
    labels = _labels(batch)
    return torch.cat([batch.anchor, batch.positive]), torch.cat([labels, labels])


def _infonce(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return infonce(batch.anchor, batch.positive, _negatives(batch), tau)


def _nt_xent(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return nt_xent(batch.anchor, batch.positive, tau)


def _dcl(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return dcl(batch.anchor, batch.positive, _negatives(batch), tau)


def _weince(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return weince(batch.anchor, batch.positive, _negatives(batch), tau, **options)


def _synco(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    """Queries = anchor, keys = positive. Without ``batch.queue`` (no MoCo state in the generic
    loop) the per-anchor ``batch.negatives`` (B, k, d) stand in for the queue: they are detached,
    like queue entries, and the synthetic negatives come from each anchor's own k negatives."""
    o = dict(options)
    queue = batch.queue if batch.queue is not None else _negatives(batch)
    synthetic = None
    if batch.step is None or batch.step >= o["warmup_steps"]:
        counts = {kind: o[f"n_{kind}"] for kind in SYNTHETIC_COUNTS}
        synthetic = synthetic_negatives(
            batch.anchor, queue, counts, batch.generator, o["hardest"],
            o["alpha_max"], o["beta_max"], o["sigma"], o["delta"], o["eta"],
        )  # fmt: skip
    return synco_loss(batch.anchor, batch.positive, queue, synthetic, tau)


def _supcon(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    z, labels = _two_views(batch)
    return supcon(z, labels, tau)


def _soft_supcon(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    z, labels = _two_views(batch)
    return soft_supcon(z, labels, tau, options["eps"])


def _y_aware(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    return y_aware_two_views(batch.anchor, batch.positive, _labels(batch), tau, options["sigma"])


def _xclr(batch: LossBatch, tau: Any, options: Mapping[str, Any]) -> Tensor:
    """The graph is ``batch.similarity`` (B, B) tiled to (2B, 2B), so each view's partner gets
    S_ii. Without one, S_ij = 1 for equal labels and 0 otherwise; softmax_j(S_ij/τ_s) then
    weighs same-class samples e^(1/τ_s) times the others, which is Soft SupCon with
    ε = e^(−1/τ_s), computed that way (no (2B, 2B) target matrix)."""
    if batch.similarity is not None:
        return xclr_two_views(batch.anchor, batch.positive, batch.similarity, tau,
                              options["tau_s"])
    z, labels = _two_views(batch)
    return soft_supcon(z, labels, tau, math.exp(-1.0 / options["tau_s"]))


LOSSES: dict[str, LossSpec] = {
    "infonce": LossSpec(fn=_infonce),
    "nt_xent": LossSpec(fn=_nt_xent, needs_negatives=False),
    "dcl": LossSpec(fn=_dcl),
    "weince": LossSpec(
        fn=_weince,
        defaults={
            "beta": "fixed",
            "kappa_rho": 10.0,
            "kappa_aic": 1.0,
            "margin_aic": 2.0,
            "rho_quantile": 0.2,
            "tail_frac": 0.10,
        },
        validate=_validate_weince,
    ),
    "synco": LossSpec(
        fn=_synco,
        defaults={
            "hardest": 1024,
            **{f"n_{kind}": n for kind, n in SYNTHETIC_COUNTS.items()},
            "alpha_max": 0.5,
            "beta_max": 1.5,
            "sigma": 0.01,
            "delta": 0.01,
            "eta": 0.01,
            "warmup_steps": 0,
            # MoCo state, read by the training loop (not by the loss): a queue of this many keys
            # from a momentum encoder updated with this coefficient; 0 = no queue, the batch's
            # negatives stand in (see _synco)
            "queue_size": 0,
            "momentum": 0.999,
        },
        validate=_validate_synco,
    ),
    "supcon": LossSpec(fn=_supcon, needs_labels=True, needs_negatives=False),
    "soft_supcon": LossSpec(
        fn=_soft_supcon,
        defaults={"eps": 0.1},
        needs_labels=True,
        needs_negatives=False,
        validate=_positive("eps"),
    ),
    "y_aware": LossSpec(
        fn=_y_aware,
        defaults={"sigma": 1.0},
        needs_labels=True,
        needs_negatives=False,
        validate=_positive("sigma"),
    ),
    "xclr": LossSpec(
        fn=_xclr,
        defaults={"tau_s": 0.1},
        needs_labels=True,
        needs_negatives=False,
        validate=_positive("tau_s"),
    ),
}


def resolve_options(name: str, given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """Defaults of loss ``name`` overlaid with ``given``; unknown keys or bad values fail naming
    ``where`` (e.g. ``loss_options.weince.beta = 'x': allowed fixed | fitted``)."""
    if name not in LOSSES:
        raise ValueError(f"{where}: unknown loss {name!r}; allowed: {sorted(LOSSES)}")
    spec = LOSSES[name]
    given = dict(given or {})
    unknown = sorted(set(given) - set(spec.defaults))
    if unknown:
        raise ValueError(
            f"{where}.{unknown[0]} = {given[unknown[0]]!r}: unknown option for loss {name!r}; "
            f"allowed: {sorted(spec.defaults) or 'none'}"
        )
    options = {**spec.defaults, **given}
    if spec.validate is not None:
        spec.validate(options, where)
    return options
