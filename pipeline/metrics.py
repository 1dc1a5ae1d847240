"""The metric registry: every metric the benchmark reports, defined once.

Each :class:`Metric` is a column of the per-cell table (``reports/cells.csv``) with its label, a
one-line description, which way is better, how it is printed and where it comes from. Every
writer (Markdown, LaTeX, HTML, the CSV headers, the ``cbench`` CLI, MLflow metric names,
``metrics.json``) and the ranking read it: a metric added to :data:`METRICS` appears everywhere,
and nothing else names metrics.

Derived columns resolve through :func:`lookup` from a base metric and a prefix:

- ``norm_`` / ``proj_`` / ``backbone_``: the statistic of the L2-normalised embeddings / of
  random projections / of the backbone's features before the encoder's head (same direction as
  the base);
- ``control_``: the same encoder before training (epoch 0, same seed and held-out data);
  ``initial_``: the untrained encoder in the search stage; ``null_``: Gaussian data of the same
  n, d and covariance; ``supervised_``: the supervised cell sharing the encoder, its initial
  weights and training rows; ``delta_``: trained − untrained; ``raw_``: the raw inputs (no
  encoder). None of these is ranked. ``weighted_knn_<k>`` is one metric per k.

- ``backbone_``: the statistic of the encoder's backbone, the features its head reads (ResNet:
  the pooled 512-d features before ``fc``; pipeline.encoders.features), where the encoder has
  both (same direction as the base).

A layer prefix may precede a representation prefix, and either may precede one control
(``backbone_norm_cv``, ``norm_null_cv``, ``backbone_control_cv``). Which prefixes a base metric
takes is part of its entry (``families``); a derived column keeps its base's ``source``.

Each entry names the stage whose table it comes from (``source``) and, where that table names it
otherwise, its column there (``column``: Theorem 1's ``total`` in ``data/bounds.parquet`` is
``bound`` here); :func:`stage_columns` is that mapping, which the report's join reads and
``tests/test_metric_sources.py`` checks against each stage's real output. To add a metric, add
one ``Metric(...)`` to ``_ENTRIES``. Pure stdlib.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

Better = Literal["higher", "lower", "neither"]
# The stage whose table a metric's column comes from: train (the cell's record, cell.json),
# stats, search, bounds, probe (their data/*.parquet), or report (computed by the report from
# other columns; no entry is, today).
Source = Literal["train", "stats", "search", "bounds", "probe", "report"]
SOURCES: tuple[Source, ...] = get_args(Source)

LAYERS = {"backbone_": ("backbone", "of the encoder's backbone (the features its head reads)")}
REPRESENTATIONS = {"norm_": ("normalised", "of the L2-normalised embeddings"),
                   "proj_": ("projected", "of random 1-D projections of the embeddings")}
CONTROLS = {
    "control_": ("untrained", "of the same encoder before training (epoch 0, same seed and "
                              "held-out data)"),
    "initial_": ("untrained", "of the untrained encoder (search stage)"),
    "null_": ("Gaussian null", "of Gaussian data with the same n, d and covariance"),
    "supervised_": ("supervised", "of the supervised cell with the same encoder, initial "
                                  "weights and training rows"),
    "delta_": ("Δ untrained", "trained minus untrained (the same encoder at epoch 0)"),
    "raw_": ("raw input", "of the raw inputs themselves (pixels or input vectors), no encoder"),
}
_BETSER = frozenset({"backbone_", "norm_", "proj_", "control_", "null_", "supervised_", "delta_"})
_GEOMETRY = frozenset({"backbone_", "norm_", "proj_"})
_SEARCH = frozenset({"initial_"})
_PROBE = frozenset({"backbone_", "control_", "supervised_", "delta_", "raw_"})
# weighted_knn_<k>: one metric per k of probe.knn_k (parametrised, resolved by lookup)
KNN_PREFIX = "weighted_knn_"
_COST = "pipeline/runtime/cells/cost.py (measured, not modelled)"


@dataclass(frozen=True)
class Metric:
    """One reported quantity.

    name: its column in ``cells.csv``; label: a short header ("R@1"); description: one line (the
    tooltip); better: higher / lower / neither (neither: a property to report, not a score, or
    not comparable across cells; never ranked); format: a format spec for one value as shown;
    unit: ``"%"`` means the value is a fraction shown × 100; reference: SPEC section or paper;
    families: the prefixes of the derived columns it has (see the module docstring); source
    (keyword only, required): the stage that produces its column (:data:`Source`); column: its
    name in that stage's table where it differs from ``name`` (the report renames it).
    """

    name: str
    label: str
    description: str
    better: Better
    format: str = ".3g"
    unit: str = ""
    reference: str = ""
    families: frozenset[str] = frozenset()
    difference: bool = False  # a ``delta_`` column: trained minus untrained
    source: Source = field(kw_only=True)
    column: str = field(default="", kw_only=True)

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The range its values lie in, where the metric is bounded: a ``%`` metric is a
        fraction in [0, 1] (its ``delta_`` difference is not); else None. Intervals over seeds
        of a bounded metric stay inside it (:func:`pipeline.stats.intervals.bounded_seed_ci`)."""
        return (0.0, 1.0) if self.unit == "%" and not self.difference else None

    @property
    def ranked(self) -> bool:
        return self.better != "neither"

    @property
    def higher(self) -> bool | None:
        """True when higher is better, False when lower is, None when neither."""
        return None if self.better == "neither" else self.better == "higher"

    @property
    def arrow(self) -> str:
        return {"higher": "↑", "lower": "↓", "neither": ""}[self.better]

    @property
    def header(self) -> str:
        """The column header: label, unit in parentheses, ↑/↓ for ranked metrics."""
        unit = f" ({self.unit})" if self.unit else ""
        return f"{self.label}{unit}{(' ' + self.arrow) if self.arrow else ''}"

    @property
    def tooltip(self) -> str:
        """The description, the direction and the reference, in one line."""
        way = {"higher": "Higher is better.", "lower": "Lower is better.",
               "neither": "Not ranked."}[self.better]
        ref = f" Source: {self.reference}." if self.reference else ""
        return f"{self.description}. {way}{ref}"

    def scale(self, value: float) -> float:
        """The value as shown (× 100 for ``%``)."""
        return value * 100.0 if self.unit == "%" else value

    def text(self, value: float | None) -> str:
        """One value as shown (no interval); '–' when missing."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        return format(self.scale(float(value)), self.format)


_ENTRIES = (
    Metric("recall_at_1", "R@1", "The positive view retrieved first among all held-out "
           "positive views", "higher", ".1f", "%", "SPEC §3 (retrieval)", _SEARCH, source="search"),
    Metric("recall_at_5", "R@5", "The positive view among the 5 nearest held-out positive views",
           "higher", ".1f", "%", "SPEC §3 (retrieval)", _SEARCH, source="search"),
    Metric("recall_at_10", "R@10", "The positive view among the 10 nearest held-out positive "
           "views", "higher", ".1f", "%", "SPEC §3 (retrieval)", _SEARCH, source="search"),
    Metric("knn_loo_majority", "kNN LOO", "Leave-one-out accuracy of a majority vote among the "
           "search.knn_k most cosine-similar other held-out points (labelled data only)",
           "higher", ".1f", "%", "SPEC §3 (retrieval)", source="search"),
    Metric("risk_keval", "Risk", "Held-out InfoNCE risk R(φ; k, τ) = E ℓ − log k at the common "
           "k = search.k_eval", "lower", ".3f", "nats", "SPEC §1, Whiteley (2026)", _SEARCH,
           source="search"),
    Metric("risk_k", "Risk@k", "Held-out InfoNCE risk at the cell's own k (not comparable "
           "across k)", "neither", ".3f", "nats", "SPEC §1, Whiteley (2026)", _SEARCH,
           source="search"),
    Metric("ce", "CE", "Population similarity-search cross-entropy (Monte Carlo) at the cell's "
           "τ", "neither", ".3f", "nats", "SPEC §3, Whiteley (2026)", _SEARCH, source="search"),
    Metric("ce_m", "CE_m", "Empirical similarity-search cross-entropy with the known density "
           "ratio (Gaussian channel only)", "neither", ".3f", "nats",
           "SPEC §3 Eq. 9, Whiteley (2026)", _SEARCH, source="search"),
    Metric("r_k", "R_k", "Risk at the cell's k in the search stage's k-sweep", "neither", ".3f",
           "nats", "SPEC §3, Whiteley (2026)", _SEARCH, source="search"),
    Metric("finite_k_gap", "CE − R_k", "Finite-k gap CE − R(φ; k, τ) at the cell's k",
           "neither", ".3f", "nats", "SPEC §3 Prop. 1, Whiteley (2026)", _SEARCH, source="search"),
    Metric("slope", "|CE − R_k| slope", "Log-log slope of |CE − R_k| against k (−1 under the "
           "O(1/k) law)", "neither", ".2f", "", "SPEC §3 Prop. 1, Whiteley (2026)", _SEARCH,
           source="search"),
    Metric("bound", "Bound", "Theorem 1's right-hand side (usually vacuous)", "neither", ".4g",
           "nats", "SPEC §4, Whiteley (2026) Thm 1", source="bounds", column="total"),
    Metric("gen_gap", "Gen. gap", "Measured generalisation gap: R on fresh tuples − R̂_n",
           "neither", ".3f", "nats", "SPEC §4, Whiteley (2026)",
           source="bounds", column="measured_gap"),
    Metric("tightness", "Bound/gap", "Tightness ratio: the bound over the measured gap",
           "neither", ".3g", "", "SPEC §4, Whiteley (2026)", source="bounds"),
    Metric("cv", "CV", "Thin-shell coefficient of variation of the embedding norms "
           "(std/mean, ddof 0)", "neither", ".3f", "", "SPEC §2, Betser et al. (2026)", _BETSER,
           source="stats"),
    Metric("ad_mean", "AD Avg", "Anderson-Darling A² averaged over coordinates (≈ 0.39 for "
           "Gaussian ones)", "neither", ".3f", "", "SPEC §2, Betser et al. (2026)", _BETSER,
           source="stats"),
    Metric("ad_pass_frac", "AD pass", "Coordinates with A² under the 5% critical value (≈ 95% "
           "for Gaussian ones)", "neither", ".0f", "%", "SPEC §2, Betser et al. (2026)", _BETSER,
           source="stats"),
    Metric("dp_p_mean", "DP Avg", "D'Agostino-Pearson p-value averaged over coordinates",
           "neither", ".3f", "", "SPEC §2, Betser et al. (2026)", _BETSER, source="stats"),
    Metric("dp_pass_frac", "DP pass", "Coordinates with D'Agostino-Pearson p > 0.05 (≈ 95% for "
           "Gaussian ones)", "neither", ".0f", "%", "SPEC §2, Betser et al. (2026)", _BETSER,
           source="stats"),
    Metric("align", "Align", "Alignment E‖u − v‖² over positive pairs", "lower", ".3f", "",
           "SPEC §2, Wang & Isola (2020)", _GEOMETRY, source="stats"),
    Metric("uniform", "Uniform", "Uniformity log E exp(−2‖u − u'‖²)", "lower", ".3f", "",
           "SPEC §2, Wang & Isola (2020)", _GEOMETRY, source="stats"),
    Metric("eff_rank", "Eff. rank", "Effective rank: exp of the entropy of the normalised "
           "singular values", "higher", ".1f", "", "SPEC §2, Roy & Vetterli (2007)", _GEOMETRY,
           source="stats"),
    Metric("linear_probe", "Linear probe", "Top-1 accuracy on the held-out split of a "
           "multinomial logistic regression on the frozen, standardised features (L2 strength "
           "chosen on a validation split)", "higher", ".1f", "%",
           "SPEC §5, Radford et al. (2021) CLIP §3.2", _PROBE, source="probe"),
    Metric("linear_probe_c", "Probe C", "The inverse L2 strength the linear probe chose on its "
           "validation split", "neither", ".3g", "", "SPEC §5", source="probe"),
    Metric("final_loss", "Train loss", "Training loss of the last epoch (scales differ between "
           "losses)", "neither", ".3g", "nats", "SPEC §1", source="train"),
    # What a cell cost (pipeline/runtime/cells/cost.py). Lower is cheaper, but none is ranked: each
    # depends on the machine and on what else ran beside the cell, so it is a property of one
    # run, not a score of a loss (the report's Pareto figure reads lower as cheaper).
    Metric("train_seconds", "Train time", "Wall-clock seconds of the training epochs (batches, "
           "views, forward, backward, optimiser steps; not set-up, snapshots or files)",
           "neither", ".3g", "s", _COST, source="train"),
    Metric("samples_per_second", "Samples/s", "Training examples per second: epochs × ⌊n/B⌋·B "
           "over the training time (each with its views and negatives)", "neither", ".3g",
           "1/s", _COST, source="train"),
    Metric("peak_rss_bytes", "Peak RSS", "Peak resident memory of the worker process while the "
           "cell trained and exported (high-water mark reset at the cell's start; includes what "
           "the process held then)", "neither", ".3g", "bytes", _COST, source="train"),
    Metric("cuda_peak_bytes", "CUDA peak", "Peak bytes of tensors the CUDA caching allocator "
           "held (torch.cuda.max_memory_allocated after a reset; CUDA cells only)", "neither",
           ".3g", "bytes", _COST, source="train"),
    Metric("energy_joules", "Energy", "Increase of the RAPL (CPU package, DRAM) and NVML (GPU) "
           "energy counters over the cell: the whole socket and GPU, work beside the cell "
           "included; missing where the machine has no readable counter", "neither", ".3g", "J",
           _COST, source="train"),
)
NOT_MEASURED = "not measured"  # energy_source where no counter was read (never a guessed value)
COST_METRICS = ("train_seconds", "samples_per_second", "peak_rss_bytes", "cuda_peak_bytes",
                "energy_joules")

METRICS: dict[str, Metric] = {m.name: m for m in _ENTRIES}


def stage_columns(source: Source) -> dict[str, str]:
    """``{column in the stage's table: metric name}`` of the registered metrics that ``source``
    produces, in registry order (``{"total": "bound", ...}`` for ``"bounds"``). The parametrised
    ``weighted_knn_<k>`` (probe) is not listed: its names depend on ``probe.knn_k``."""
    return {m.column or m.name: m.name for m in METRICS.values() if m.source == source}

# What the interval a single cell carries in cells.csv (``<name>_lo``/``_hi``, or ``<name>_se``)
# is over. A cell is one seed, so none of these is over seeds: they measure one fixed encoder
# (rows, anchors) or spread over coordinates, which is not a confidence interval (SPEC §6).
_ANCHORS_SE = "held-out anchors (standard error of the mean)"
_COORDINATES = "coordinates (a spread over the d coordinates, not a confidence interval)"
CELL_INTERVALS: dict[str, str] = {
    "risk_keval": _ANCHORS_SE, "risk_k": _ANCHORS_SE, "ce": _ANCHORS_SE, "ce_m": _ANCHORS_SE,
    "finite_k_gap": _ANCHORS_SE,
    "slope": "held-out anchors (the fit's confidence interval over the k sweep)",
    "cv": "held-out rows (percentile bootstrap)",
    "ad_mean": _COORDINATES, "dp_p_mean": _COORDINATES,
    "ad_pass_frac": "coordinates (Wilson interval of the fraction of coordinates that pass)",
    "dp_pass_frac": "coordinates (Wilson interval of the fraction of coordinates that pass)",
}


def _derived(base: Metric, name: str, layer: str, rep: str, control: str) -> Metric:
    """The entry of ``<layer><rep><control><base>`` (any prefix may be empty)."""
    tags, phrases = [], []
    for prefix, table in ((layer, LAYERS), (rep, REPRESENTATIONS), (control, CONTROLS)):
        if prefix and prefix != "delta_":
            tags.append(table[prefix][0])
            phrases.append(table[prefix][1])
    description = ", ".join([base.description, *phrases])
    if control == "delta_":
        description += ": " + CONTROLS["delta_"][1]
    label = f"Δ {base.label}" if control == "delta_" else base.label
    label += f" ({', '.join(tags)})" if tags else ""
    better = base.better if not control else "neither"
    return replace(base, name=name, label=label, description=description, better=better,
                   families=frozenset(), difference=control == "delta_", column="")


def _knn(name: str) -> Metric | None:
    """``weighted_knn_<k>``: the weighted kNN accuracy with k neighbours."""
    k = name.removeprefix(KNN_PREFIX)
    if not (name.startswith(KNN_PREFIX) and k.isdigit() and int(k) > 0):
        return None
    return Metric(name, f"kNN@{int(k)}", f"Top-1 accuracy of a weighted kNN on the frozen "
                  f"features: the {int(k)} most cosine-similar training points vote with weight "
                  "exp(s/T)", "higher", ".1f", "%", "SPEC §5, Wu et al. (2018)", _PROBE,
                  source="probe")


def _base(name: str) -> Metric | None:
    return METRICS.get(name) or _knn(name)


def _resolve(name: str) -> Metric | None:
    if _base(name) is not None:
        return _base(name)
    for layer in ("", *LAYERS):
        if not name.startswith(layer):
            continue
        for rep in ("", *REPRESENTATIONS):
            if not name.startswith(layer + rep):
                continue
            rest = name[len(layer + rep):]
            for control in ("", *CONTROLS):
                base = _base(rest[len(control):]) if rest.startswith(control) else None
                if ((layer or rep or control) and base is not None
                        and {layer, rep, control} - {""} <= base.families):
                    return _derived(base, name, layer, rep, control)
    return None


def is_metric(name: str) -> bool:
    """True when ``name`` is a registered metric or one of its derived columns."""
    return _resolve(name) is not None


def lookup(name: str) -> Metric:
    """The metric named ``name`` (a registered one or a derived column such as ``control_cv``).

    ValueError naming it and the allowed ones when it is neither.
    """
    metric = _resolve(name)
    if metric is None:
        families = ", ".join(f"{p}<metric>" for p in (*LAYERS, *REPRESENTATIONS, *CONTROLS))
        raise ValueError(f"metric {name!r}: not in the registry (pipeline/metrics.py); allowed: "
                         f"{', '.join(METRICS)}, {KNN_PREFIX}<k>, and the derived columns "
                         f"{families} where the metric has them")
    return metric


def metric_columns(columns: list[str] | tuple[str, ...]) -> list[str]:
    """The names in ``columns`` that are metrics, in their order."""
    return [c for c in columns if is_metric(c)]
