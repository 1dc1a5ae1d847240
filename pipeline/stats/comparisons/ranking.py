"""Ranks of methods across blocks and the tests on them (SPEC §6; Demšar 2006, JMLR 7, §3.2).

Input everywhere: ``scores`` of shape ``(N, m, S)``: N blocks (the combinations of the other grid
axes, or the tasks of a suite) × m methods × S seeds, NaN where a cell is missing or failed. A
method's score on a block is its mean over the seeds it has there; a block is *complete* when
every method has at least one seed on it. Ranks, the Friedman test and the Nemenyi post-hoc use
the complete blocks only (a rank among the methods present is not comparable across blocks);
each pairwise Wilcoxon test uses the blocks where both of its methods are present. How many
blocks each step used is part of its result.

Ranks: 1 = best, ties averaged (``higher_is_better`` says which way is best).

Tiers (the rule; :func:`tiers`): the methods are put in order of mean rank. When the omnibus test
(Iman–Davenport's F at ``alpha``) does not reject, no pair is told apart and there is one tier.
Otherwise two methods *differ* when the post-hoc says so (Nemenyi: |R_a − R_b| ≥ CD; or
Wilcoxon–Holm: adjusted p < alpha). Tier 1 is the longest run of methods from the best one in
which no two differ; tier 2 the longest such run from the next method, and so on. The *groups*
(the bars of the critical-difference diagram) are the maximal runs in rank order in which no two
differ; they may overlap, the tiers do not. A method and the first method of the next tier may
still not differ (the pairs table says so): a tier boundary means "the run cannot be extended",
not "every member of the next tier is worse".

Pure numpy/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

PostHoc = Literal["nemenyi", "wilcoxon"]


def check_scores(scores: np.ndarray, methods: tuple[str, ...] | list[str]) -> np.ndarray:
    """``scores`` as a float ``(N, m, S)`` array; ValueError unless its shape fits ``methods``."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim == 2:  # one seed per cell
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise ValueError(f"scores.shape = {arr.shape}: expected (blocks, methods, seeds)")
    if arr.shape[1] != len(methods):
        raise ValueError(f"scores.shape[1] = {arr.shape[1]} but {len(methods)} methods named: "
                         f"{list(methods)}")
    if len(methods) < 2:
        raise ValueError(f"methods = {list(methods)}: a comparison needs at least 2 methods")
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods = {list(methods)}: names must be unique")
    return arr


def seed_means(scores: np.ndarray) -> np.ndarray:
    """``(N, m)``: the mean over each cell's seeds present; NaN where a method has none."""
    present = np.isfinite(scores)
    counts = present.sum(axis=2)
    sums = np.where(present, scores, 0.0).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: np.ndarray = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return means


def block_ranks(means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """``(N, m)`` ranks within each row (1 = best, ties averaged) of complete rows ``means``."""
    signed = -means if higher_is_better else means
    ranks: np.ndarray = sps.rankdata(signed, axis=1, method="average")
    return ranks


@dataclass(frozen=True)
class Friedman:
    """The Friedman test over ``blocks`` complete blocks and ``methods`` methods.

    chi2: χ²_F with SciPy's tie correction (equal to ``scipy.stats.friedmanchisquare``);
    chi2_uncorrected: Demšar's Eq. without it (SPEC §6); iman_davenport: F_F from ``chi2`` with
    (df1, df2) = (m − 1, (m − 1)(N − 1)) degrees of freedom. NaN where N < 2.
    """

    chi2: float
    chi2_p: float
    chi2_uncorrected: float
    iman_davenport: float
    iman_davenport_p: float
    df1: int
    df2: int
    blocks: int
    methods: int


def friedman_chi2(mean_rank: np.ndarray, n: int) -> float:
    """Demšar's χ²_F = 12N/(m(m+1)) [Σ_j R_j² − m(m+1)²/4] of m mean ranks over N blocks (no tie
    correction; SPEC §6)."""
    r = np.asarray(mean_rank, dtype=np.float64)
    m = r.size
    return float(12.0 * n / (m * (m + 1)) * (np.sum(r**2) - m * (m + 1) ** 2 / 4.0))


def iman_davenport(chi2: float, n: int, m: int) -> tuple[float, float]:
    """(F_F, p): F_F = (N − 1)χ²_F / (N(m − 1) − χ²_F) on (m − 1, (m − 1)(N − 1)) degrees of
    freedom (Iman & Davenport 1980; Demšar 2006 Eq. 2). F_F = ∞, p = 0 when every block ranks the
    methods alike (χ²_F = N(m − 1)); NaN when N < 2."""
    if n < 2 or not math.isfinite(chi2):
        return float("nan"), float("nan")
    denom = n * (m - 1) - chi2
    if denom <= 1e-12 * n * m:
        return math.inf, 0.0
    f = (n - 1) * chi2 / denom
    return float(f), float(sps.f.sf(f, m - 1, (m - 1) * (n - 1)))


def friedman(ranks: np.ndarray) -> Friedman:
    """The Friedman χ² and Iman–Davenport F of ``(N, m)`` within-block ranks (ties averaged)."""
    n, m = ranks.shape
    nan = float("nan")
    df1, df2 = m - 1, (m - 1) * (n - 1)
    if n < 2:
        return Friedman(nan, nan, nan, nan, nan, df1, df2, n, m)
    uncorrected = friedman_chi2(ranks.mean(axis=0), n)
    ties = 0.0
    for row in ranks:  # Σ (t³ − t) over the groups of tied ranks of each block
        _, counts = np.unique(row, return_counts=True)
        ties += float(np.sum(counts**3 - counts))
    correction = 1.0 - ties / (n * m * (m * m - 1))
    if correction <= 1e-12:  # every block a full tie: nothing to tell apart
        return Friedman(nan, nan, uncorrected, nan, nan, df1, df2, n, m)
    chi2 = uncorrected / correction
    f, f_p = iman_davenport(chi2, n, m)
    return Friedman(float(chi2), float(sps.chi2.sf(chi2, df1)), uncorrected, f, f_p, df1, df2,
                    n, m)


def nemenyi_q(m: int, alpha: float) -> float:
    """q_α of the Nemenyi test: the studentized range quantile (1 − α; m, ∞) / √2 (Demšar 2006,
    Table 5: 2.343, 2.569, 2.728 for m = 3, 4, 5 at α = 0.05)."""
    return float(sps.studentized_range.ppf(1.0 - alpha, m, np.inf) / math.sqrt(2.0))


def critical_difference(m: int, n: int, alpha: float) -> float:
    """The Nemenyi critical difference of mean ranks, q_α √(m(m + 1)/(6N)); NaN when N = 0."""
    if n < 1:
        return float("nan")
    return nemenyi_q(m, alpha) * math.sqrt(m * (m + 1) / (6.0 * n))


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979): sort ascending, multiply the i-th smallest
    (0-based) by (n − i), take the running maximum, clip at 1. NaN entries stay NaN and do not
    count among the n tests."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = p[order] * (ok.size - np.arange(ok.size))
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out


@dataclass(frozen=True)
class PairTest:
    """Methods ``a`` and ``b`` (by name): the Nemenyi and the Wilcoxon–Holm comparisons.

    rank_difference: R_a − R_b over the complete blocks (negative: a ranks better);
    nemenyi_differs: |R_a − R_b| ≥ CD and the omnibus test rejected; wilcoxon_statistic /
    wilcoxon_p: the two-sided signed-rank test of the seed means over the ``blocks`` blocks where
    both are present (zero differences split between the signs, Demšar's convention); holm_p:
    that p adjusted by Holm over all pairs; wilcoxon_differs: holm_p < alpha, not gated by the
    omnibus test (Holm's step-down already controls the family-wise error over all pairs;
    Benavoli et al. 2016), while Nemenyi's is (Demšar's two-step procedure).
    """

    a: str
    b: str
    rank_difference: float
    nemenyi_differs: bool
    wilcoxon_statistic: float
    wilcoxon_p: float
    holm_p: float
    wilcoxon_differs: bool
    blocks: int


def wilcoxon_pair(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(T, p) of the two-sided signed-rank test of x − y, zeros split (``zero_method="zsplit"``);
    (NaN, NaN) with fewer than 2 pairs, (T, 1) when every difference is 0."""
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    if d.size < 2:
        return float("nan"), float("nan")
    if np.all(d == 0):
        return float(d.size * (d.size + 1) / 4.0), 1.0
    res = sps.wilcoxon(d, zero_method="zsplit", alternative="two-sided")
    return float(res.statistic), float(res.pvalue)


@dataclass(frozen=True)
class Ranking:
    """Ranks of ``methods`` over the complete blocks, the tests and the tiers.

    block_ranks: ``(blocks_complete, m)``; mean_rank: ``(m,)`` (NaN with no complete block);
    blocks_total: N; blocks_complete: the blocks where every method is present; cd / q_alpha:
    Nemenyi's critical difference and quantile; separated: the omnibus test rejected at alpha;
    order: method indices best first; tier: per method (1 = best); groups: the maximal runs in
    rank order with no two members differing (the CD diagram's bars), as tuples of names.
    """

    methods: tuple[str, ...]
    higher_is_better: bool
    alpha: float
    posthoc: PostHoc
    block_ranks: np.ndarray
    mean_rank: np.ndarray
    blocks_total: int
    blocks_complete: int
    friedman: Friedman
    q_alpha: float
    cd: float
    separated: bool
    pairs: tuple[PairTest, ...]
    order: tuple[int, ...]
    tier: tuple[int, ...]
    groups: tuple[tuple[str, ...], ...]

    def pair(self, a: str, b: str) -> PairTest:
        """The test of ``a`` against ``b`` (either order; ``rank_difference`` is R_a − R_b)."""
        for p in self.pairs:
            if (p.a, p.b) == (a, b):
                return p
            if (p.b, p.a) == (a, b):
                return PairTest(a, b, -p.rank_difference, p.nemenyi_differs,
                                p.wilcoxon_statistic, p.wilcoxon_p, p.holm_p,
                                p.wilcoxon_differs, p.blocks)
        raise KeyError(f"no pair ({a!r}, {b!r}) among methods {list(self.methods)}")


def tiers(order: list[int], differs: np.ndarray) -> tuple[list[int], list[tuple[int, ...]]]:
    """Tier per method and the maximal non-separated runs, from the rank ``order`` (best first)
    and a symmetric ``(m, m)`` boolean ``differs`` (see the module docstring for the rule)."""
    m = len(order)

    def run_end(start: int) -> int:  # last position j such that order[start..j] has no pair
        end = start
        while end + 1 < m and not any(differs[order[end + 1], order[i]]
                                      for i in range(start, end + 1)):
            end += 1
        return end

    tier = [0] * differs.shape[0]
    start, t = 0, 1
    while start < m:
        end = run_end(start)
        for i in range(start, end + 1):
            tier[order[i]] = t
        start, t = end + 1, t + 1
    groups: list[tuple[int, ...]] = []
    last_end = -1
    for start in range(m):
        end = run_end(start)
        if end > last_end:  # not inside the previous run: maximal
            groups.append(tuple(order[start:end + 1]))
            last_end = end
    return tier, groups


def rank_methods(scores: np.ndarray, methods: tuple[str, ...] | list[str], higher_is_better: bool,
                 alpha: float = 0.05, posthoc: PostHoc = "nemenyi") -> Ranking:
    """Ranks, Friedman/Iman–Davenport, Nemenyi, Wilcoxon–Holm and tiers of ``(N, m, S)`` scores."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha!r}: significance level must be in (0, 1)")
    if posthoc not in ("nemenyi", "wilcoxon"):
        raise ValueError(f"posthoc = {posthoc!r}: expected 'nemenyi' or 'wilcoxon'")
    methods = tuple(methods)
    arr = check_scores(scores, methods)
    means = seed_means(arr)
    complete = np.all(np.isfinite(means), axis=1)
    m, n = len(methods), int(complete.sum())
    ranks = block_ranks(means[complete], higher_is_better) if n else np.empty((0, m))
    mean_rank = ranks.mean(axis=0) if n else np.full(m, np.nan)
    test = friedman(ranks)
    separated = bool(test.iman_davenport_p < alpha)
    q, cd = nemenyi_q(m, alpha), critical_difference(m, n, alpha)
    idx = [(i, j) for i in range(m) for j in range(i + 1, m)]
    wil = []
    for i, j in idx:
        both = np.isfinite(means[:, i]) & np.isfinite(means[:, j])
        wil.append((*wilcoxon_pair(means[both, i], means[both, j]), int(both.sum())))
    adjusted = holm(np.array([w[1] for w in wil]))
    pairs, differs = [], np.zeros((m, m), dtype=bool)
    for (i, j), (t, p, blocks), p_adj in zip(idx, wil, adjusted, strict=True):
        delta = float(mean_rank[i] - mean_rank[j])
        nem = bool(separated and abs(delta) >= cd)
        wx = bool(p_adj < alpha)
        pairs.append(PairTest(methods[i], methods[j], delta, nem, t, p, float(p_adj), wx, blocks))
        differs[i, j] = differs[j, i] = separated and (nem if posthoc == "nemenyi" else wx)
    key = np.where(np.isfinite(mean_rank), mean_rank, np.inf)
    order = [int(i) for i in np.argsort(key, kind="stable")]
    tier, groups = tiers(order, differs)
    return Ranking(methods, higher_is_better, alpha, posthoc, ranks, mean_rank, means.shape[0], n,
                   test, q, cd, separated, tuple(pairs), tuple(order), tuple(tier),
                   tuple(tuple(methods[i] for i in g) for g in groups))
