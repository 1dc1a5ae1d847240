"""Aggregates of methods over (block × seed) scores with stratified-bootstrap intervals (SPEC §6).

``scores``: ``(N, m, S)``, N blocks × m methods × S seeds, NaN where missing (see
:mod:`pipeline.stats.comparisons.ranking`). A method's aggregates use the blocks where it has at
least one seed; the blocks it lacks are left out and counted (``blocks_missing``), never filled in.

- Mean and interquartile mean (IQM: the mean of the middle 50% of a method's (block × seed)
  scores, ``scipy.stats.trim_mean(x, 0.25)``; Agarwal et al. 2021, NeurIPS, "Deep RL at the edge
  of the statistical precipice", library rliable), of the scores as they are (not flipped).
- Probability of improvement P(A > B) = (1/N_AB) Σ_i P(X_iA > X_iB) over the N_AB blocks where
  both are present, each term the Mann–Whitney statistic over the two seed sets, ties ½.
- Intervals: the stratified bootstrap of rliable: each resample draws, within every block and for
  every method independently, as many seeds as the method has there, with replacement; blocks
  are kept. So the interval is over **seeds** (training variation) given the blocks; with one seed
  per cell there is no such variation and its bounds are NaN.
- Mean win rate (HELM, Liang et al. 2022): per block, the fraction of the other methods present
  there that the method's seed mean beats (a tie counts ½); then the mean over the blocks where
  the method and at least one other are present, each block weighing the same. Pooling every
  (block, other method) pair instead weighs a block by how many methods it has, and differs
  from HELM's when blocks are missing a method.
- Borda count (MTEB): Σ_i (m − r_ij) over the complete blocks (the blocks ``ranking`` uses).
- Rank interval and P(rank = 1) (SPEC §7): :mod:`pipeline.stats.comparisons.rank_uncertainty`.
- Optimality gap on per-block min–max normalised scores (SPEC §7):
  :mod:`pipeline.stats.comparisons.profiles`.

The aggregates are the entries of :data:`AGGREGATES` (one :class:`Aggregate` each: its function,
label, direction and CSV columns); :func:`aggregate_methods` and the report's tables read that
list, so a new aggregate is one entry there (docs/DESIGN.md, "A comparison statistic").

Pure numpy/scipy; every draw from the ``rng`` passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from pipeline.stats.comparisons.profiles import optimality_gaps
from pipeline.stats.comparisons.rank_uncertainty import rank_uncertainty
from pipeline.stats.comparisons.ranking import block_ranks, check_scores, seed_means
from pipeline.stats.uncertainty import ConfidenceInterval, check_level


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along ``axis``: ``scipy.stats.trim_mean(x, 0.25, axis)``."""
    return np.asarray(sps.trim_mean(x, 0.25, axis=axis))


def _interval(estimate: float, draws: np.ndarray, level: float) -> ConfidenceInterval:
    lo, hi = np.quantile(draws, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return ConfidenceInterval(float(estimate), float(lo), float(hi), level)


def _resample(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_boot, k)`` draws with replacement from the k values of one (block, method)."""
    return values[rng.integers(0, values.size, size=(n_boot, values.size))]


@dataclass(frozen=True)
class MethodAggregate:
    """One method's aggregates.

    blocks: blocks where it has a seed; blocks_missing: N − blocks; scores: its (block × seed)
    values used; values: every CSV column of every entry of :data:`AGGREGATES` (``iqm``,
    ``iqm_lo``, ``iqm_hi``, ``win_rate``, ...) → its value; borda_blocks: the complete blocks
    the Borda count is over. ``mean`` / ``iqm`` (intervals by the stratified bootstrap over
    seeds, NaN bounds when no block has 2 seeds), ``win_rate`` (HELM's mean win rate) and
    ``borda`` (MTEB's count) read ``values``.
    """

    method: str
    blocks: int
    blocks_missing: int
    scores: int
    values: Mapping[str, float]
    borda_blocks: int
    level: float = 0.95

    def interval(self, name: str) -> ConfidenceInterval:
        """The ``"seeds"`` aggregate ``name`` with its interval."""
        v = self.values
        return ConfidenceInterval(v[name], v[f"{name}_lo"], v[f"{name}_hi"], self.level)

    @property
    def mean(self) -> ConfidenceInterval:
        return self.interval("mean")

    @property
    def iqm(self) -> ConfidenceInterval:
        return self.interval("iqm")

    @property
    def win_rate(self) -> float:
        return self.values["win_rate"]

    @property
    def borda(self) -> float:
        return self.values["borda"]


@dataclass(frozen=True)
class Improvement:
    """P(a > b) over the ``blocks`` blocks where both are present, its stratified-bootstrap
    interval over seeds (NaN bounds when no block has 2 seeds of either)."""

    a: str
    b: str
    probability: ConfidenceInterval
    blocks: int


def _cells(arr: np.ndarray, j: int) -> list[np.ndarray]:
    """The finite seed values of method j in each block where it has any."""
    out = []
    for i in range(arr.shape[0]):
        v = arr[i, j][np.isfinite(arr[i, j])]
        if v.size:
            out.append(v)
    return out


def win_rates(means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """``(m,)`` HELM mean win rate of ``(N, m)`` seed means (NaN: missing; ties ½): per block,
    the fraction of the other methods present that a method beats, averaged over the blocks
    where it and another method are present (NaN where there is none)."""
    signed = np.where(np.isfinite(means), means if higher_is_better else -means, np.nan)
    present = np.isfinite(signed)
    a, b = signed[:, :, None], signed[:, None, :]
    with np.errstate(invalid="ignore"):
        beats = (a > b) + 0.5 * (a == b)  # (N, m, m): method j against method k in block i
    pair = present[:, :, None] & present[:, None, :]
    pair &= ~np.eye(signed.shape[1], dtype=bool)[None]
    others = pair.sum(axis=2)  # (N, m): other methods present beside j in block i
    wins = np.where(pair, beats, 0.0).sum(axis=2)
    counted = others > 0
    per_block = np.where(counted, wins / np.maximum(others, 1), 0.0)
    blocks = counted.sum(axis=0)
    return np.where(blocks > 0, per_block.sum(axis=0) / np.maximum(blocks, 1), np.nan)


def borda_counts(scores: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """``(m,)`` MTEB's Borda count Σ_i (m − r_ij) over the complete blocks of ``(N, m, S)``
    scores (zeros when there is none)."""
    means = seed_means(scores)
    complete = np.all(np.isfinite(means), axis=1)
    m = means.shape[1]
    if not complete.any():
        return np.zeros(m)
    counts: np.ndarray = (m - block_ranks(means[complete], higher_is_better)).sum(axis=0)
    return counts


AggregateKind = Literal["seeds", "methods", "resampled"]


@dataclass(frozen=True)
class Aggregate:
    """One comparison aggregate: an entry of :data:`AGGREGATES`.

    name: its key (and first column); label: its header; higher_is_better: the direction of the
    aggregate itself (a mean rank is better lower, whatever the metric's direction); columns: its
    ``ranks.csv`` columns; board: shown in the leaderboard's table; headers: the table's header
    of each column (a ``_lo``, ``_hi`` pair shows as one ``[lo, hi]`` cell under the first's;
    ignored for ``"seeds"`` entries, shown as ``estimate [lo, hi]`` on the metric's scale);
    format: the format spec of a value shown ("": the report's default); note: one sentence for
    the notes (empty: none); kind, and what ``statistic`` is:

    - ``"seeds"``: ``statistic(values)`` maps a method's (block × seed) scores, flattened on the
      last axis, ``(..., k) → (...)``; the estimate is of the scores, the interval
      (``<name>_lo``, ``<name>_hi``) from the stratified bootstrap over seeds that every
      ``"seeds"`` entry shares (one set of draws per method, as rliable's ``library.py``).
    - ``"methods"``: ``statistic(scores, higher_is_better)``: ``(N, m, S) → (m,)``, one value per
      method from all of them (win rate, Borda).
    - ``"resampled"``: ``statistic(scores, higher_is_better, n_boot, rng, level)``: ``(N, m, S)``
      → ``(m, len(columns))``, with a bootstrap of its own (drawn from a generator spawned from
      ``rng``, so the other entries' draws do not depend on it).
    """

    name: str
    label: str
    higher_is_better: bool
    kind: AggregateKind
    statistic: Callable[..., np.ndarray]
    columns: tuple[str, ...]
    board: bool = False
    headers: tuple[str, ...] = ()
    format: str = ".2f"
    note: str = ""


def _mean(values: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.asarray(values).mean(axis=-1)
    return out


def _win_rates(scores: np.ndarray, higher_is_better: bool) -> np.ndarray:
    return win_rates(seed_means(scores), higher_is_better)


def _rank_interval(scores: np.ndarray, higher_is_better: bool, n_boot: int,
                   rng: np.random.Generator, level: float) -> np.ndarray:
    r = rank_uncertainty(scores, higher_is_better, n_boot, rng, level)
    return np.column_stack([r.low, r.high, r.p_rank1])


AGGREGATES: tuple[Aggregate, ...] = (
    Aggregate("iqm", "IQM", True, "seeds", iqm, ("iqm", "iqm_lo", "iqm_hi"), board=True),
    Aggregate("mean", "Mean", True, "seeds", _mean, ("mean", "mean_lo", "mean_hi")),
    Aggregate("win_rate", "Win rate", True, "methods", _win_rates, ("win_rate",), board=True,
              headers=("Win rate",)),
    Aggregate("borda", "Borda", True, "methods", borda_counts, ("borda",), board=True,
              headers=("Borda",), format=""),
    Aggregate("rank_interval", "Rank interval", False, "resampled", _rank_interval,
              ("rank_lo", "rank_hi", "p_rank1"), board=True,
              headers=("Mean rank interval", "", "P(rank 1)"),
              note="Rank interval, P(rank 1): the mean rank's percentile bootstrap over the "
                   "blocks and the seeds within each; P(rank 1) the share of resamples ranking "
                   "it first."),
    Aggregate("optimality_gap", "Optimality gap", False, "resampled", optimality_gaps,
              ("optimality_gap", "optimality_gap_lo", "optimality_gap_hi"),
              note="Optimality gap (Agarwal et al. 2021): the mean over a method's (block × "
                   "seed) runs of max(0, 1 − x), x the run's score min–max normalised within "
                   "its block over the methods' seed means (1: the best mean there; a block "
                   "where all are equal is left out); stratified bootstrap over seeds."),
)
"""The registry: ``ranks.csv`` has these columns in this order (after tier, method, mean rank)."""


def aggregate_columns(aggregates: tuple[Aggregate, ...] = AGGREGATES) -> tuple[str, ...]:
    """Every CSV column of ``aggregates``, in order."""
    return tuple(c for a in aggregates for c in a.columns)


def _seed_values(cells: list[np.ndarray], seeded: list[Aggregate], n_boot: int,
                 rng: np.random.Generator, level: float) -> dict[str, float]:
    """The ``"seeds"`` entries of one method from its cells (one set of bootstrap draws)."""
    out: dict[str, float] = {}
    if not cells:
        return {c: float("nan") for a in seeded for c in a.columns}
    flat = np.concatenate(cells)
    varied = max(c.size for c in cells) >= 2  # else no seed variation to resample
    draws = np.concatenate([_resample(c, n_boot, rng) for c in cells], axis=1) if varied \
        else None
    for a in seeded:
        estimate = float(a.statistic(flat))
        if draws is None:
            ci = ConfidenceInterval(estimate, float("nan"), float("nan"), level)
        else:
            ci = _interval(estimate, a.statistic(draws), level)
        out |= dict(zip(a.columns, (ci.estimate, ci.low, ci.high), strict=True))
    return out


def aggregate_methods(scores: np.ndarray, methods: tuple[str, ...] | list[str],
                      higher_is_better: bool, n_boot: int, rng: np.random.Generator,
                      level: float = 0.95, aggregates: tuple[Aggregate, ...] = AGGREGATES
                      ) -> tuple[MethodAggregate, ...]:
    """Per method, every entry of ``aggregates`` (default: the registry)."""
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot = {n_boot}: number of bootstrap resamples must be >= 1")
    methods = tuple(methods)
    arr = check_scores(scores, methods)
    complete = int(np.all(np.isfinite(seed_means(arr)), axis=1).sum())
    seeded = [a for a in aggregates if a.kind == "seeds"]
    across: dict[str, np.ndarray] = {}
    for a in aggregates:
        if a.kind == "methods":
            across[a.columns[0]] = np.asarray(a.statistic(arr, higher_is_better), dtype=float)
    per_method = []
    for j in range(len(methods)):
        cells = _cells(arr, j)
        per_method.append((cells, _seed_values(cells, seeded, n_boot, rng, level)))
    resampled = [a for a in aggregates if a.kind == "resampled"]
    if resampled:
        child = rng.spawn(1)[0]
        for a in resampled:
            table = np.asarray(a.statistic(arr, higher_is_better, n_boot, child, level), float)
            for k, col in enumerate(a.columns):
                across[col] = table[:, k]
    out = []
    for j, name in enumerate(methods):
        cells, values = per_method[j]
        values = values | {col: float(v[j]) for col, v in across.items()}
        ordered = {c: values[c] for c in aggregate_columns(aggregates)}
        used = sum(c.size for c in cells)
        out.append(MethodAggregate(name, len(cells), arr.shape[0] - len(cells), int(used),
                                   ordered, complete, level))
    return tuple(out)


def mann_whitney_probability(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + ½ P(X = Y) over all pairs of the last axes' values: x ``(..., p)``, y
    ``(..., q)`` → ``(...)``; the Mann–Whitney U of x against y divided by p·q."""
    gt = (x[..., :, None] > y[..., None, :]).mean(axis=(-2, -1))
    eq = (x[..., :, None] == y[..., None, :]).mean(axis=(-2, -1))
    probability: np.ndarray = gt + 0.5 * eq
    return probability


def improvement(scores: np.ndarray, methods: tuple[str, ...] | list[str], higher_is_better: bool,
                n_boot: int, rng: np.random.Generator,
                level: float = 0.95) -> tuple[Improvement, ...]:
    """P(A > B) for every pair (a before b in ``methods``), stratified-bootstrap intervals."""
    check_level(level)
    methods = tuple(methods)
    arr = check_scores(scores, methods)
    signed = arr if higher_is_better else -arr
    m = len(methods)
    out = []
    for a in range(m):
        for b in range(a + 1, m):
            terms, boots, varied = [], [], False
            for i in range(arr.shape[0]):
                x = signed[i, a][np.isfinite(signed[i, a])]
                y = signed[i, b][np.isfinite(signed[i, b])]
                if not (x.size and y.size):
                    continue
                terms.append(float(mann_whitney_probability(x, y)))
                varied |= x.size > 1 or y.size > 1
                boots.append(mann_whitney_probability(_resample(x, n_boot, rng),
                                                      _resample(y, n_boot, rng)))
            if not terms:
                ci = ConfidenceInterval(float("nan"), float("nan"), float("nan"), level)
            elif not varied:
                ci = ConfidenceInterval(float(np.mean(terms)), float("nan"), float("nan"), level)
            else:
                ci = _interval(float(np.mean(terms)), np.mean(boots, axis=0), level)
            out.append(Improvement(methods[a], methods[b], ci, len(terms)))
    return tuple(out)
