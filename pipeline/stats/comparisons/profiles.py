"""Performance profiles and the optimality gap (SPEC §7; Agarwal et al. 2021, NeurIPS, "Deep RL
at the edge of the statistical precipice", §4 and Fig. 5; library rliable).

``scores``: ``(N, m, S)``, N blocks × m methods × S seeds, NaN where missing (see
:mod:`pipeline.stats.comparisons.ranking`). Lower-is-better metrics are flipped first (``−x``), as
the ranking does, so that higher is better everywhere below.

Normalisation per block (:func:`normalise`), with constants from the methods' **seed means** in
the block, fixed once from the observed data (as rliable's reference scores are fixed; a
bootstrap resample does not re-estimate them):

- ``"minmax"``: (x − lo_i) / (hi_i − lo_i), lo_i and hi_i the worst and best seed means of the
  methods present in block i. The best method's mean is 1, the worst's 0; single seeds may fall
  outside [0, 1].
- ``"baseline"``: (x − b_i) / (hi_i − b_i), b_i the baseline method's seed mean: the baseline's
  mean is 0, the best method's 1 (below 0: worse than the baseline).

A block is left out (all its normalised values NaN, counted in ``blocks_flat``) when the rule
has no scale there: fewer than 2 methods present, every seed mean equal (hi_i = lo_i), or, for
``"baseline"``, the baseline absent or itself the best (hi_i = b_i). Nothing is filled in.

Profile of a method: τ ↦ the fraction of its (block × seed) normalised runs with a score > τ
(strictly, as rliable's ``run_score_deviation``), pooled over the blocks it has runs in, each
run weighing the same (a block with a missing seed has fewer runs); default τ grid:
:func:`tau_grid` (the middle 90% of the runs, and [0, 1]). Optimality gap: the mean of
max(0, γ − x) over the same runs (= γ − mean(min(x, γ)), rliable's
``aggregate_optimality_gap``); γ = 1 is "as good as the best method's mean in every block".

Intervals: the stratified bootstrap of :mod:`pipeline.stats.comparisons.aggregates`: each resample
draws, within every block and for every method independently, as many seeds as the method has there,
with replacement; the blocks are kept. The profile's band is pointwise (percentiles at each τ).
With one seed per cell there is no variation over seeds and the bounds are NaN.

Pure numpy; every draw from the ``rng`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from pipeline.stats.comparisons.ranking import check_scores, seed_means
from pipeline.stats.uncertainty import ConfidenceInterval, check_level

Rule = Literal["minmax", "baseline"]
TAU_POINTS = 101  # points of the default τ grid


@dataclass(frozen=True)
class Normalised:
    """Scores normalised per block. scores: ``(N, m, S)``, higher is better, NaN where missing
    or in a left-out block; rule: ``"minmax"`` or ``"baseline"``; baseline: its name (None for
    min–max); blocks_used / blocks_flat: blocks with a scale / left out without one."""

    scores: np.ndarray
    rule: str
    baseline: str | None
    blocks_used: int
    blocks_flat: int


@dataclass(frozen=True)
class Profile:
    """One method's performance profile: ``fraction[t]`` = the share of its normalised runs
    with a score > ``tau[t]``; ``low`` / ``high``: the pointwise stratified-bootstrap band at
    ``level`` (NaN without seed variation); runs / blocks: what it is over."""

    method: str
    tau: np.ndarray
    fraction: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    runs: int
    blocks: int


@dataclass(frozen=True)
class OptimalityGap:
    """One method's mean of max(0, γ − x) over its normalised runs, with its stratified-bootstrap
    interval (NaN bounds without seed variation; NaN estimate without runs)."""

    method: str
    gap: ConfidenceInterval
    gamma: float
    runs: int
    blocks: int


@dataclass(frozen=True)
class Profiles:
    """The profiles and optimality gaps of every method (in the order given), on one grid."""

    normalised: Normalised
    tau: np.ndarray
    profiles: tuple[Profile, ...]
    gaps: tuple[OptimalityGap, ...]

    def gap(self, method: str) -> OptimalityGap:
        """The optimality gap of ``method`` (KeyError naming the methods otherwise)."""
        for g in self.gaps:
            if g.method == method:
                return g
        raise KeyError(f"no method {method!r} among {[g.method for g in self.gaps]}")


def normalise(scores: np.ndarray, methods: tuple[str, ...] | list[str], higher_is_better: bool,
              rule: Rule = "minmax", baseline: str | None = None) -> Normalised:
    """Per-block normalisation of ``(N, m, S)`` scores by ``rule`` (module docstring)."""
    methods = tuple(methods)
    arr = check_scores(scores, methods)
    if rule not in ("minmax", "baseline"):
        raise ValueError(f"rule = {rule!r}: allowed: 'minmax', 'baseline'")
    if rule == "baseline" and baseline not in methods:
        raise ValueError(f"baseline = {baseline!r}: the baseline rule needs one of the methods "
                         f"{list(methods)}")
    signed = arr if higher_is_better else -arr
    means = seed_means(signed)  # (N, m)
    present = np.isfinite(means)
    with np.errstate(invalid="ignore"):
        hi = np.where(present, means, -np.inf).max(axis=1)
        lo = np.where(present, means, np.inf).min(axis=1)
    if rule == "baseline":
        lo = means[:, methods.index(str(baseline))]  # NaN where the baseline is absent
    with np.errstate(invalid="ignore"):
        scaled = (present.sum(axis=1) >= 2) & np.isfinite(lo) & (hi > lo)
    span = np.where(scaled, hi - lo, 1.0)
    out = np.where(scaled[:, None, None], (signed - np.where(scaled, lo, 0.0)[:, None, None])
                   / span[:, None, None], np.nan)
    return Normalised(out, rule, baseline if rule == "baseline" else None, int(scaled.sum()),
                      int((~scaled).sum()))


def tau_grid(normalised: np.ndarray, points: int = TAU_POINTS, tail: float = 0.05) -> np.ndarray:
    """``points`` evenly spaced τ from min(0, q) to max(1, Q), q and Q the ``tail`` and
    1 − ``tail`` quantiles of the runs: with methods close in a block, min–max spreads single
    seeds far from [0, 1], and a grid over every run would squash the part that matters."""
    x = normalised[np.isfinite(normalised)]
    if not x.size:
        return np.linspace(0.0, 1.0, points)
    q_lo, q_hi = np.quantile(x, [tail, 1.0 - tail])
    return np.linspace(min(0.0, float(q_lo)), max(1.0, float(q_hi)), points)


def profile_values(runs: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``(..., T)``: the share of the last axis's values of ``runs`` ``(..., n)`` above each τ."""
    ordered = np.sort(runs, axis=-1)
    n = ordered.shape[-1]
    flat = ordered.reshape(-1, n)
    at_most = np.stack([np.searchsorted(row, tau, side="right") for row in flat])
    share: np.ndarray = (1.0 - at_most / n).reshape(*ordered.shape[:-1], tau.size)
    return share


def optimality_gap_values(runs: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``(...)``: the mean of max(0, γ − x) over the last axis of ``runs``."""
    gap: np.ndarray = np.maximum(0.0, gamma - runs).mean(axis=-1)
    return gap


def _cells(x: np.ndarray) -> list[np.ndarray]:
    """The finite values of one method's ``(N, S)`` normalised runs, per block that has any."""
    out = [row[np.isfinite(row)] for row in x]
    return [c for c in out if c.size]


def performance_profiles(scores: np.ndarray, methods: tuple[str, ...] | list[str],
                         higher_is_better: bool, n_boot: int, rng: np.random.Generator,
                         level: float = 0.95, tau: np.ndarray | None = None, gamma: float = 1.0,
                         rule: Rule = "minmax", baseline: str | None = None) -> Profiles:
    """Per method: the performance profile on ``tau`` (default :func:`tau_grid`) and the
    optimality gap at ``gamma``, of the scores normalised by ``rule``, with stratified-bootstrap
    intervals at ``level`` from ``n_boot`` resamples (the same resamples for both)."""
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot = {n_boot}: number of bootstrap resamples must be >= 1")
    if not np.isfinite(gamma):
        raise ValueError(f"gamma = {gamma}: the optimality gap's target must be finite")
    methods = tuple(methods)
    norm = normalise(scores, methods, higher_is_better, rule, baseline)
    grid = tau_grid(norm.scores) if tau is None else np.asarray(tau, dtype=np.float64)
    if grid.ndim != 1 or not grid.size or not np.all(np.isfinite(grid)):
        raise ValueError(f"tau = {tau!r}: a non-empty 1-D grid of finite thresholds")
    q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    nan_t = np.full(grid.size, np.nan)
    profiles, gaps = [], []
    for j, name in enumerate(methods):
        cells = _cells(norm.scores[:, j])
        flat = np.concatenate(cells) if cells else np.empty(0)
        if not flat.size:
            profiles.append(Profile(name, grid, nan_t, nan_t, nan_t, level, 0, 0))
            gaps.append(OptimalityGap(name, ConfidenceInterval(np.nan, np.nan, np.nan, level),
                                      gamma, 0, 0))
            continue
        fraction = profile_values(flat, grid)
        gap = float(optimality_gap_values(flat, gamma))
        if max(c.size for c in cells) < 2:  # no seed variation to resample
            band, gap_ci = (nan_t, nan_t), ConfidenceInterval(gap, np.nan, np.nan, level)
        else:
            draws = np.concatenate([c[rng.integers(0, c.size, size=(n_boot, c.size))]
                                    for c in cells], axis=1)  # (n_boot, runs)
            lo_t, hi_t = np.quantile(profile_values(draws, grid), q, axis=0)
            band = (lo_t, hi_t)
            g_lo, g_hi = np.quantile(optimality_gap_values(draws, gamma), q)
            gap_ci = ConfidenceInterval(gap, float(g_lo), float(g_hi), level)
        profiles.append(Profile(name, grid, fraction, band[0], band[1], level, int(flat.size),
                                len(cells)))
        gaps.append(OptimalityGap(name, gap_ci, gamma, int(flat.size), len(cells)))
    return Profiles(norm, grid, tuple(profiles), tuple(gaps))


def optimality_gaps(scores: np.ndarray, higher_is_better: bool, n_boot: int,
                    rng: np.random.Generator, level: float = 0.95) -> np.ndarray:
    """``(m, 3)``: each method's optimality gap at γ = 1 of the min–max normalised ``(N, m, S)``
    scores and its stratified-bootstrap bounds (estimate, low, high), as an aggregate-registry
    entry computes it (:data:`pipeline.stats.comparisons.aggregates.AGGREGATES`)."""
    arr = np.asarray(scores, dtype=np.float64)
    names = [f"m{j}" for j in range(arr.shape[1])]
    res = performance_profiles(arr, names, higher_is_better, n_boot, rng, level,
                               tau=np.array([0.0]))
    return np.array([[g.gap.estimate, g.gap.low, g.gap.high] for g in res.gaps])
