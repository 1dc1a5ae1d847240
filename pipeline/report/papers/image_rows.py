"""Betser et al.'s image rows measured as the paper measures them: the protocol, point by point,
and contrastive against supervised against untrained, on the head and on the backbone.

Betser et al. (2026), Table 1, compares ResNet-18 on CIFAR-10 trained contrastively and with
cross-entropy (SPEC.md §2). What their text available to this project states (abstract, project
page, SPEC.md §2): CIFAR-10, ResNet-18, contrastive (InfoNCE) vs supervised with the same
architecture, statistics of unnormalised embeddings. What it does not state — which layer, the
augmentations, epochs, batch size, τ, optimiser — is assumed to be SimCLR's CIFAR-10 recipe (Chen
et al. 2020, arXiv 2002.05709, Appendix B.9), and each assumption is written as one.

:func:`protocol_rows` lays each point beside this run's setting (from the cells' resolved
configs) with a note where they differ. :func:`image_comparison` gives, per layer (``head``: the
encoder's output, what InfoNCE sees; ``backbone``: the pooled features the head reads, SimCLR's
h), CV, AD Avg, AD pass, DP Avg and DP pass of the contrastive cells, the supervised cells, the
untrained encoder (epoch 0, the same initial weights for both objectives) and the Gaussian null,
and the verdict on "contrastive is more Gaussian than supervised" (see :func:`verdict`): held,
contradicted or unresolved with its reason, decided over seeds (:func:`compare`: the paired
Student-t interval; unresolved with fewer than ``MIN_SEEDS``), and "undertrained" when either
encoder fails the trained-enough check (:mod:`pipeline.report.papers.trained_enough`). Values only:
:mod:`pipeline.report.papers.image_rows_md` writes them as Markdown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.metrics import METRICS
from pipeline.report.papers.table1 import BETSER_TABLE1, STATS
from pipeline.report.papers.trained_enough import CRITERION, TrainedEnough, trained_enough
from pipeline.stats.comparisons.inference import (
    CONTRADICTED,
    HELD,
    MIN_SEEDS,
    NO_VALUES,
    UNRESOLVED,
    Verdict,
    normal_quantile,
    side_verdict,
)
from pipeline.stats.uncertainty import seed_ci

# the paper's direction for "contrastive is more Gaussian": lower CV and A², higher pass rates
MORE_GAUSSIAN = {"cv": -1, "ad_mean": -1, "ad_pass_frac": +1, "dp_p_mean": +1, "dp_pass_frac": +1}
MORE, LESS = "more Gaussian", "less Gaussian"  # which side of zero a difference lies on
UNDERTRAINED = "undertrained"  # decided, but an encoder failed the trained-enough check
DECISIVE = ("cv", "ad_mean")  # the two statistics the verdict rests on (Table 1's headline)
LAYERS = {"head": ("", "head: the encoder's output z (what InfoNCE sees)"),
          "backbone": ("backbone_", "backbone: the pooled features h its head reads")}
# Table 1's CIFAR-10 ResNet-18 rows, per objective
PUBLISHED = {objective: BETSER_TABLE1[("cifar10", "resnet18", objective)].values
             for objective in ("contrastive", "supervised")}


# --- the protocol, point by point ------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One point of the protocol: what the paper did (``stated`` or ``assumed``) and how to read
    this run's setting from a cell config; ``differs(config)`` says how this run departs."""

    name: str
    paper: str
    source: str  # "stated" (abstract, project page, SPEC.md §2) or "assumed" (SimCLR's recipe)
    this_run: Callable[[Mapping[str, Any]], str]
    differs: Callable[[Mapping[str, Any]], str]


def _aug(c: Mapping[str, Any]) -> Mapping[str, Any]:
    return c["data"]["augment"]


def _augment_text(c: Mapping[str, Any]) -> str:
    a = _aug(c)
    if "crop_scale" not in a:
        return ", ".join(f"{k} {v}" for k, v in sorted(a.items())) or "none"
    parts = [f"crop scale {a['crop_scale'][0]:g}–{a['crop_scale'][1]:g}",
             f"flip {'on' if a['hflip'] else 'off'}",
             f"jitter p {a['jitter_prob']:g} (brightness {a['brightness']:g}, contrast "
             f"{a['contrast']:g}, saturation {a['saturation']:g}, hue {a['hue']:g}, "
             f"{a['jitter_order']} order)",
             f"greyscale p {a['grayscale_prob']:g}", f"blur p {a['blur_prob']:g}"]
    return "; ".join(parts)


SIMCLR_AUG = {"crop_scale": [0.08, 1.0], "hflip": True, "jitter_prob": 0.8, "brightness": 0.4,
              "contrast": 0.4, "saturation": 0.4, "hue": 0.1, "grayscale_prob": 0.2,
              "blur_prob": 0.0}


def _augment_differs(c: Mapping[str, Any]) -> str:
    a = _aug(c)
    if "crop_scale" not in a:
        return "not image views"
    grey = c["data"]["name"] in ("mnist", "fashion_mnist", "digits")
    off = [k for k, v in SIMCLR_AUG.items() if a.get(k) != v
           and not (grey and k in ("saturation", "hue", "grayscale_prob"))]
    note = "; grey images: saturation, hue and greyscale do nothing" if grey else ""
    return (f"differs in {', '.join(off)}" if off else "") + note


def _steps(c: Mapping[str, Any]) -> int:
    return int(c["train"]["epochs"]) * (int(c["n"]) // int(c["train"]["batch_size"]))


def _width(c: Mapping[str, Any]) -> int:
    """A ResNet-18 cell's width (channels of its first stage; 64 is torchvision's)."""
    return int((c.get("arch_options") or {}).get("width", 64))


def _head_text(c: Mapping[str, Any]) -> str:
    if c["arch"] != "resnet18":
        return str(c["arch"])
    width = _width(c)
    return (f"{c['arch']}" + (f" at width {width}" if width != 64 else "")
            + f", linear head {8 * width} → {c['embed_dim']}")


def _encoder_differs(c: Mapping[str, Any]) -> str:
    if c["arch"] != "resnet18":
        return "not a ResNet-18"
    width = _width(c)
    narrow = (f"; width {width}: stages of {width}–{8 * width} channels, not 64–512"
              if width != 64 else "")
    return "the head is one linear map (pipeline/encoders/resnet.py), not an MLP" + narrow


def _loss_text(c: Mapping[str, Any]) -> str:
    if c["k"] is None:  # a loss that reads no k: NT-Xent's negatives are the batch's other views
        return f"{c['loss']}, all 2B − 2 other views of the batch"
    return f"{c['loss']}, k = {c['k']}, {c['train']['negatives']} negatives"


PROTOCOL = (
    Point("data", "CIFAR-10 (50 000 train / 10 000 test images)", "stated",
          lambda c: f"{c['data']['name']}, {c['n']} train / {c['data']['n_heldout']} held-out",
          lambda c: "" if c["data"]["name"] == "cifar10" and c["n"] == 50000
          else "another data set or fewer images"),
    Point("encoder", "ResNet-18 (CIFAR stem assumed); projection head: SimCLR's 2-layer MLP "
          "512 → 512 → 128 assumed", "stated / assumed", _head_text, _encoder_differs),
    Point("representation", "not stated (\"representations\" of the trained encoder); SimCLR "
          "evaluates h (backbone), InfoNCE acts on z (head)", "assumed",
          lambda c: "both: head (z) and backbone (h; its dead ReLU units, 0 on every held-out "
          "image, left out: they have no AD or DP statistic and no effect on norms)",
          lambda c: ""),
    Point("normalisation", "unnormalised embeddings (Table 1)", "stated",
          lambda c: "raw (rows below); normalised in cells.csv (norm_)", lambda c: ""),
    Point("augmentations", "SimCLR CIFAR-10: crop scale 0.08–1, flip, jitter p 0.8 (0.4, 0.4, "
          "0.4, 0.1), greyscale p 0.2, no blur", "assumed", _augment_text, _augment_differs),
    Point("training length", "hundreds of epochs (SimCLR: 100–1000)", "assumed",
          lambda c: f"{c['train']['epochs']} epochs = {_steps(c)} steps",
          lambda c: "" if c["train"]["epochs"] >= 100 else "far shorter (CPU-sized)"),
    Point("batch size", "512 (SimCLR CIFAR-10; the paper's synthetic runs: 8–128)", "assumed",
          lambda c: str(c["train"]["batch_size"]),
          lambda c: "" if c["train"]["batch_size"] == 512 else "differs"),
    Point("temperature", "0.5 (SimCLR CIFAR-10; the paper's synthetic runs: 0.1, 0.2)", "assumed",
          lambda c: f"{c['tau']:g} ({c['tau_schedule']})",
          lambda c: "" if c["tau"] == 0.5 else "differs"),
    Point("loss", "InfoNCE / NT-Xent, in-batch negatives", "stated / assumed",
          _loss_text,
          lambda c: "; ".join(n for n in (
              "" if c["loss"] in ("infonce", "nt_xent") else "another loss",
              "" if c["train"]["negatives"] in ("in_batch", None) else "independent negatives")
              if n)),
    Point("optimiser", "not stated (SimCLR: LARS; the paper's synthetic runs: Adam 1e-3)",
          "assumed", lambda c: f"{c['train']['optimizer']}, lr {c['train']['lr']:g}",
          lambda c: ""),
    Point("supervised control", "same ResNet-18, cross-entropy on the labels", "stated",
          lambda c: "same encoder and initial weights, linear classifier on the head, same views",
          lambda c: "trained on the contrastive views (SimCLR's supervised baseline: crops and "
          "flips)"),
)


def protocol_rows(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per protocol point: paper, its source, this run (the distinct values over the
    contrastive cells' configs) and the note."""
    rows = []
    for p in PROTOCOL:
        runs = list(dict.fromkeys(p.this_run(c) for c in configs))
        notes = [n for n in dict.fromkeys(p.differs(c) for c in configs) if n]
        rows.append({"point": p.name, "paper": p.paper, "source": p.source,
                     "this_run": " | ".join(runs), "note": "; ".join(notes)})
    return rows


# --- contrastive vs supervised vs untrained ----------------------------------------------------

def _z(level: float) -> float:
    return normal_quantile(level)


def _mean_se(part: pd.DataFrame, col: str, level: float) -> tuple[float, float]:
    """Mean over the cells and its standard error from each cell's ``level`` interval
    (se_i = (hi − lo)/(2z); se of the mean √Σse_i² / n); se NaN without intervals."""
    if col not in part or part[col].isna().all():
        return math.nan, math.nan
    values = part[col].to_numpy(float)
    if f"{col}_lo" in part and f"{col}_hi" in part:
        se = (part[f"{col}_hi"] - part[f"{col}_lo"]).to_numpy(float) / (2 * _z(level))
        return float(np.mean(values)), float(np.sqrt(np.sum(se ** 2)) / len(se))
    return float(np.mean(values)), math.nan


def _per_seed(part: pd.DataFrame, col: str) -> pd.Series:
    """Each seed's mean of ``col`` over its cells (the seeds with a value)."""
    if col not in part or "seed" not in part:
        return pd.Series(dtype=float)
    return part.groupby("seed")[col].mean().dropna()


@dataclass(frozen=True)
class Difference:
    """a − b of one statistic: ``value`` and its interval [lo, hi]; ``side``: :data:`MORE` (a
    more Gaussian than b in the sense of Betser et al.), :data:`LESS`, or ``unresolved`` with
    ``reason`` (:func:`~pipeline.stats.comparisons.inference.too_few_seeds`, "interval covers zero",
    "no values"); ``seeds``: the seeds it was decided over."""

    value: float
    lo: float
    hi: float
    side: str
    reason: str = ""
    seeds: int = 0


def compare(a: pd.DataFrame, col_a: str, b: pd.DataFrame, col_b: str, stat: str,
            level: float) -> Difference:
    """a − b of the statistic ``stat`` (``a``'s ``col_a`` against ``b``'s ``col_b``) and on which
    side of zero it lies (:class:`Difference`).

    The verdict is about training, so it is decided over seeds: with at least ``MIN_SEEDS``
    seeds on both sides, the difference is the mean over those seeds of each seed's a − b, its
    interval the paired Student-t interval over them (S − 1 degrees of freedom,
    :func:`pipeline.stats.uncertainty.seed_ci`), and the side is read by
    :func:`~pipeline.stats.comparisons.inference.side_verdict` (claimed side: more Gaussian). With
    fewer seeds the side is unresolved ("too few seeds"), and the interval is the within-cell one
    (the cells' own ``level`` intervals combined by the normal approximation, the two
    independent): how precisely the held-out data measure these encoders, not how training
    varies."""
    per_a, per_b = _per_seed(a, col_a), _per_seed(b, col_b)
    seeds = per_a.index.intersection(per_b.index)
    if len(seeds) >= MIN_SEEDS:
        ci = seed_ci(per_a[seeds].to_numpy() - per_b[seeds].to_numpy(), level)
        diff, lo, hi = ci.estimate, ci.low, ci.high
    else:
        (va, se_a), (vb, se_b) = _mean_se(a, col_a, level), _mean_se(b, col_b, level)
        diff = va - vb
        half = _z(level) * math.hypot(se_a, se_b)
        lo, hi = diff - half, diff + half
    if not np.isfinite(diff):
        return Difference(diff, lo, hi, UNRESOLVED, NO_VALUES, len(seeds))
    got = side_verdict(lo, hi, MORE_GAUSSIAN[stat], len(seeds))
    side = {HELD: MORE, CONTRADICTED: LESS}.get(got.value, UNRESOLVED)
    return Difference(diff, lo, hi, side, got.reason, len(seeds))


def common_seeds(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """How many seeds both sides have a cell of."""
    if "seed" not in a or "seed" not in b:
        return 0
    return len(set(a.seed.dropna()) & set(b.seed.dropna()))


def verdict(sides: Mapping[str, Difference]) -> Verdict:
    """"Contrastive is more Gaussian than supervised", decided on CV and AD Avg
    (:data:`DECISIVE`): held when both are :data:`MORE`, contradicted when both are
    :data:`LESS`; else unresolved with the reason: too few seeds, "statistics disagree" (one
    each way), or each unresolved statistic's own reason ("CV: interval covers zero")."""
    decisive = {s: sides[s] for s in DECISIVE}
    few = next((d.reason for d in decisive.values() if d.reason.startswith("too few")), None)
    if few is not None:
        return Verdict(UNRESOLVED, few)
    found = {d.side for d in decisive.values()}
    if found == {MORE}:
        return Verdict(HELD)
    if found == {LESS}:
        return Verdict(CONTRADICTED)
    if {MORE, LESS} <= found:
        return Verdict(UNRESOLVED, "statistics disagree: " + ", ".join(
            f"{METRICS[s].label} {d.side}" for s, d in decisive.items()))
    return Verdict(UNRESOLVED, "; ".join(f"{METRICS[s].label}: {d.reason}"
                                         for s, d in decisive.items() if d.side == UNRESOLVED))


@dataclass(frozen=True)
class Estimate:
    """A statistic over some cells: its value and, where the cells have intervals, the ``level``
    interval (``lo``/``hi``; None without one)."""

    value: float
    lo: float | None = None
    hi: float | None = None


def _estimate(part: pd.DataFrame, col: str, level: float) -> Estimate:
    """One cell's own interval; over several cells the mean ± z·se (normal approximation),
    fractions clipped to [0, 1]; the value alone without intervals."""
    value, se = _mean_se(part, col, level)
    stat = next(s for s in STATS if col.endswith(s))
    if not (np.isfinite(value) and np.isfinite(se)):
        return Estimate(value)
    if len(part) == 1:
        lo, hi = float(part[f"{col}_lo"].iloc[0]), float(part[f"{col}_hi"].iloc[0])
    else:
        lo, hi = value - _z(level) * se, value + _z(level) * se
        if METRICS[stat].unit == "%":
            lo, hi = min(max(lo, 0.0), 1.0), max(min(hi, 1.0), 0.0)
    return Estimate(value, lo, hi)


def _probe(part: pd.DataFrame, col: str) -> float | None:
    """The mean linear-probe accuracy in ``col`` (the probe stage, SPEC §5); None without it (a
    dataset without class labels, or the probe not run)."""
    if col not in part or not part[col].notna().any():
        return None
    return float(part[col].mean())


NULL = "Gaussian null"  # the comparison's row of Gaussian data: no interval, no probe


@dataclass(frozen=True)
class EncoderRow:
    """One row of the comparison: an encoder's cells on one layer, each statistic's
    :class:`Estimate` (in ``STATS`` order) and the mean linear-probe accuracy (None: none)."""

    layer: str
    encoder: str  # contrastive, supervised, untrained (epoch 0), Gaussian null
    cells: int
    stats: Mapping[str, Estimate]
    probe: float | None


def checked(v: Verdict, enough: TrainedEnough) -> Verdict:
    """``v`` after the trained-enough check: a decided verdict whose encoders failed it is
    :data:`UNDERTRAINED` (the reason lists the failed comparisons); an unresolved one stays
    unresolved, and an unchecked one (no probe) keeps its value."""
    if not v.decided or enough.passed is not False:
        return v
    return Verdict(UNDERTRAINED, "; ".join(
        f"{c.encoder} {c.score} {100 * c.value:.1f}% ≤ {c.against} {100 * c.reference:.1f}%"
        for c in enough.failed))


@dataclass(frozen=True)
class LayerVerdict:
    """On one layer: contrastive − supervised per statistic and the claim's verdict (:func:`verdict`
    then :func:`checked` against both encoders' trained-enough check), with ``reason``;
    contrastive − untrained and its verdict (did contrastive training itself move them; checked
    against the contrastive encoder alone)."""

    layer: str
    vs_supervised: Mapping[str, Difference]
    verdict: str
    vs_untrained: Mapping[str, Difference]
    untrained_verdict: str
    seeds: int = 0  # seeds with both a contrastive and a supervised cell
    untrained_seeds: int = 0  # contrastive seeds (each against its own epoch 0)
    reason: str = ""
    untrained_reason: str = ""
    trained_enough: TrainedEnough = TrainedEnough(CRITERION, ())

    def row(self) -> dict[str, Any]:
        """The CSV and metrics row: each statistic's difference, its interval and side; the
        verdict, its reason and whether both encoders were trained enough (None: no probe)."""
        row: dict[str, Any] = {"layer": self.layer}
        for s, d in self.vs_supervised.items():
            row.update({f"{s}_difference": d.value, f"{s}_difference_lo": d.lo,
                        f"{s}_difference_hi": d.hi, f"{s}_side": d.side})
        row.update(verdict=self.verdict, reason=self.reason, seeds=self.seeds,
                   trained_enough=self.trained_enough.passed)
        return row


@dataclass(frozen=True)
class ImageComparison:
    """Contrastive vs supervised vs untrained vs the Gaussian null, per layer, at ``level``;
    ``raw_probe``: the linear probe on the raw pixels (None: not run)."""

    level: float
    rows: tuple[EncoderRow, ...]
    layers: tuple[LayerVerdict, ...]
    raw_probe: float | None

    def table(self) -> list[dict[str, Any]]:
        """One row per layer for the CSV and the metrics (:meth:`LayerVerdict.row`)."""
        return [v.row() for v in self.layers]


def _layer(layer: str, prefix: str, con: pd.DataFrame, sup: pd.DataFrame, level: float,
           raw: float | None) -> LayerVerdict:
    """The verdicts on one layer (column ``prefix``)."""
    sides = {s: compare(con, prefix + s, sup, prefix + s, s, level) for s in STATS}
    moved = {s: compare(con, prefix + s, con, f"{prefix}control_{s}", s, level) for s in STATS}
    enough = trained_enough({"contrastive": con, "supervised": sup}, prefix, raw)
    claim = checked(verdict(sides), enough)
    itself = checked(verdict(moved), enough.of("contrastive"))
    return LayerVerdict(layer, sides, claim.value, moved, itself.value, common_seeds(con, sup),
                        common_seeds(con, con), claim.reason, itself.reason, enough)


def image_comparison(board: pd.DataFrame, level: float = 0.95) -> ImageComparison | None:
    """Contrastive vs supervised vs untrained vs the Gaussian null, per layer, with the verdicts;
    None when the board lacks either objective."""
    ok = board[board.status == "ok"] if "status" in board else board
    con, sup = ok[ok.objective == "contrastive"], ok[ok.objective == "supervised"]
    if con.empty or sup.empty:
        return None
    rows: list[EncoderRow] = []
    layers = []
    raw = _probe(ok, "raw_linear_probe")
    for layer, (prefix, _) in LAYERS.items():
        if f"{prefix}cv" not in con:
            continue
        entries = (("contrastive", con, prefix, _probe(con, f"{prefix}linear_probe")),
                   ("supervised", sup, prefix, _probe(sup, f"{prefix}linear_probe")),
                   ("untrained (epoch 0)", con, f"{prefix}control_",
                    _probe(con, f"{prefix}control_linear_probe")),
                   (NULL, con, f"{prefix}null_", None))
        for name, part, pre, probe in entries:
            stats = {s: _estimate(part, pre + s, level) if name != NULL
                     else Estimate(_mean_se(part, pre + s, level)[0]) for s in STATS}
            rows.append(EncoderRow(layer, name, len(part), stats, probe))
        layers.append(_layer(layer, prefix, con, sup, level, raw))
    return ImageComparison(level, tuple(rows), tuple(layers), raw)
