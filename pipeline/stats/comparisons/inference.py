"""The inference the report's tables use, in one place (named results, no rendering).

- :func:`normal_quantile`: z such that a two-sided normal interval has coverage ``level``.
- :func:`paired`: a variant against the baseline over paired seeds (t-test and Wilcoxon);
  :func:`paired_many`: the same for many pairs at once, in vectorised SciPy calls.
- :func:`welch_tie`: whether a row's seeds differ from the best row's (Welch's t-test).
- :func:`side_verdict`, :func:`majority`: the three-valued verdict on a claimed effect (SPEC §7);
  :func:`seed_slopes`: each seed's log-log slope, whose t-interval a trend verdict reads.

Every test here is over seeds: the unit of a verdict about a training procedure (SPEC §6).
:data:`MIN_SEEDS` is how many a verdict needs; with fewer, the verdict is *unresolved* with the
reason :func:`too_few_seeds`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps

from pipeline.stats.uncertainty import check_level, seed_ci

MIN_SEEDS = 3  # seeds a verdict about training needs (slopes of a trend, pairs of a comparison)

# The three values of a verdict (SPEC §7). "Not held" is not one: absence of evidence is not
# evidence against, so an interval covering zero leaves the claim unresolved.
HELD, CONTRADICTED, UNRESOLVED = "held", "contradicted", "unresolved"
COVERS_ZERO = "interval covers zero"
NO_VALUES = "no values"


@lru_cache(maxsize=256)
def normal_quantile(level: float) -> float:
    """Φ⁻¹((1 + level)/2): 1.959964 at level 0.95; ValueError unless level is in (0, 1).
    Cached: the report asks for the same level thousands of times (6500 calls at 1000 cells,
    SciPy's ppf ~0.2 ms a call)."""
    return float(sps.norm.ppf((1.0 + check_level(level)) / 2.0))


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of one metric: differences are variant − baseline."""

    n_pairs: int
    baseline_mean: float
    variant_mean: float
    diff_mean: float
    diff_lo: float
    diff_hi: float
    t_stat: float
    p_value: float
    wilcoxon_p: float
    significant: bool


def _dropped(variant: np.ndarray, baseline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs without a NaN on either side."""
    v, b = np.asarray(variant, dtype=float), np.asarray(baseline, dtype=float)
    keep = ~(np.isnan(v) | np.isnan(b))
    return v[keep], b[keep]


def paired(variant: np.ndarray, baseline: np.ndarray, level: float = 0.95,
           alpha: float = 0.05) -> PairedResult:
    """Compare paired samples ``(n,)``; pairs with a NaN on either side are dropped.

    Tests need two pairs (NaN p-values otherwise); the Wilcoxon p is NaN when every difference is
    zero. ``significant`` is ``p_value < alpha`` (t-test).
    """
    v, b = _dropped(variant, baseline)
    ci = seed_ci(v - b, level)
    mean, lo, hi = ci.estimate, ci.low, ci.high
    t_stat = p = w_p = np.nan
    if v.size >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # zero-variance differences
            res = sps.ttest_rel(v, b)
            t_stat, p = float(res.statistic), float(res.pvalue)
            if np.any(v != b):
                w_p = float(sps.wilcoxon(v, b).pvalue)
    return PairedResult(int(v.size), float(np.mean(b)) if b.size else np.nan,
                        float(np.mean(v)) if v.size else np.nan, mean, lo, hi, t_stat, p, w_p,
                        bool(p < alpha))


_EXACT_MAX = 50  # SciPy's Wilcoxon is exact up to this many pairs without zeros or ties
_PERMUTED_MAX = 13  # with zeros or ties, a permutation test over all 2**n signs up to this many


def _wilcoxon_path(d: np.ndarray) -> str:
    """The test SciPy's ``wilcoxon`` (``method='auto'``) runs on differences ``d``: ``exact``
    (2 to 50, none zero, no two of the same size), ``permutation`` (zeros or ties, at most 13:
    every sign pattern, so deterministic), or ``other`` (anything else: tested on its own). A
    stack of rows of one path and length gets the same p-values as each row alone
    (``tests/stats/test_inference.py``)."""
    if d.size < 2 or not np.all(np.isfinite(d)) or not np.any(d != 0):
        return "other"
    size = np.sort(np.abs(d))
    if size[0] > 0 and np.all(size[1:] != size[:-1]):
        return "exact" if d.size <= _EXACT_MAX else "other"
    return "permutation" if d.size <= _PERMUTED_MAX else "other"


def _permutation_p(diff: np.ndarray) -> np.ndarray:
    """SciPy's Wilcoxon p-value of each row of ``diff`` (rows of the ``permutation`` path), one
    SciPy call per distinct signed-rank pattern: the test reads only the signs of the
    differences and the ranks of their sizes (ties averaged, zeros kept), so a row and its
    pattern ``sign(d) · rank(|d|)``, sorted, get the same p-value; at 5 seeds a few dozen
    patterns stand for thousands of rows."""
    patterns = np.sort(np.sign(diff) * sps.rankdata(np.abs(diff), axis=1), axis=1)
    found: dict[bytes, float] = {}
    out = np.empty(len(diff))
    for j, pattern in enumerate(patterns):
        key = pattern.tobytes()
        if key not in found:
            found[key] = float(sps.wilcoxon(pattern).pvalue)
        out[j] = found[key]
    return out


def paired_many(pairs: Sequence[tuple[np.ndarray, np.ndarray]], level: float = 0.95,
                alpha: float = 0.05) -> list[PairedResult]:
    """:func:`paired` of each (variant, baseline) in ``pairs``, in order, with the same results:
    pairs of one length and one Wilcoxon path (:func:`_wilcoxon_path`) share one ``ttest_rel``
    call and one ``wilcoxon`` call (``axis=1``; rows of the permutation path, one call per
    signed-rank pattern: :func:`_permutation_p`); the rest are tested one by one. A leaderboard
    compares thousands of settings × metrics, and SciPy's cost per call (~7 ms for both
    tests) was most of the report's time."""
    check_level(level)
    out: list[PairedResult | None] = [None] * len(pairs)
    kept = [_dropped(v, b) for v, b in pairs]
    stacks: dict[tuple[str, int], list[int]] = {}
    for i, (v, b) in enumerate(kept):
        path = _wilcoxon_path(v - b)
        if path == "other":
            out[i] = paired(v, b, level, alpha)
        else:
            stacks.setdefault((path, v.size), []).append(i)
    for (path, n), rows in stacks.items():
        var, base = np.stack([kept[i][0] for i in rows]), np.stack([kept[i][1] for i in rows])
        diff = var - base
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # zero-variance differences
            t = sps.ttest_rel(var, base, axis=1)
        w_p = (sps.wilcoxon(var, base, axis=1, method="exact").pvalue if path == "exact"
               else _permutation_p(diff))
        for j, i in enumerate(rows):
            ci, p = seed_ci(diff[j], level), float(t.pvalue[j])
            out[i] = PairedResult(n, float(base[j].mean()), float(var[j].mean()), ci.estimate,
                                  ci.low, ci.high, float(t.statistic[j]), p, float(w_p[j]),
                                  bool(p < alpha))
    return [r for r in out if r is not None]


@dataclass(frozen=True)
class WelchTie:
    """tied: the two samples do not differ by Welch's t-test (p >= alpha); p: its p-value
    (NaN where either side has fewer than 2 values: then ``tied`` is False, never a tie by
    default); equal_constant: both samples constant (p is NaN, tied when they are equal)."""

    tied: bool
    p: float
    equal_constant: bool


def welch_tie(x: np.ndarray, ref: np.ndarray, alpha: float) -> WelchTie:
    """Welch's two-sample t-test of per-seed values ``x`` against ``ref`` (the best row's)."""
    x, ref = np.asarray(x, dtype=float), np.asarray(ref, dtype=float)
    if len(x) < 2 or len(ref) < 2:
        return WelchTie(False, float("nan"), False)
    if np.ptp(x) == 0 and np.ptp(ref) == 0:
        return WelchTie(bool(x[0] == ref[0]), float("nan"), True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly constant seeds
        p = float(sps.ttest_ind(x, ref, equal_var=False).pvalue)
    return WelchTie(bool(p >= alpha), p, False)


def too_few_seeds(seeds: int) -> str:
    """The reason of a verdict left unresolved by too few seeds: ``too few seeds (2 < 3)``."""
    return f"too few seeds ({seeds} < {MIN_SEEDS})"


@dataclass(frozen=True)
class Verdict:
    """A verdict on a claim (SPEC §7): ``value`` is :data:`HELD` (the interval of the claimed
    effect excludes zero on the claimed side), :data:`CONTRADICTED` (on the other side) or
    :data:`UNRESOLVED` (a report may add its own, e.g. "undertrained"); ``reason`` says why it is
    unresolved ("" when decided)."""

    value: str
    reason: str = ""

    @property
    def decided(self) -> bool:
        """Held or contradicted: the claim was tested."""
        return self.value in (HELD, CONTRADICTED)


def side_verdict(low: float, high: float, claimed: int, seeds: int) -> Verdict:
    """The verdict on an effect claimed to lie on side ``claimed`` (−1: below zero, +1: above)
    of zero, from its interval [low, high] over ``seeds`` seeds: unresolved with
    :func:`too_few_seeds` below :data:`MIN_SEEDS`, with :data:`NO_VALUES` when a bound is not
    finite, with :data:`COVERS_ZERO` when the interval contains 0 (a bound at 0 counts as
    covering it)."""
    if claimed not in (-1, 1):
        raise ValueError(f"claimed = {claimed!r}: the claimed side must be -1 or +1")
    if seeds < MIN_SEEDS:
        return Verdict(UNRESOLVED, too_few_seeds(seeds))
    if not (np.isfinite(low) and np.isfinite(high)):
        return Verdict(UNRESOLVED, NO_VALUES)
    if low > 0 or high < 0:
        return Verdict(HELD if (1 if low > 0 else -1) == claimed else CONTRADICTED)
    return Verdict(UNRESOLVED, COVERS_ZERO)


def majority(verdicts: Sequence[Verdict], unit: str = "groups") -> Verdict:
    """One verdict from several (the groups of cells of a grid): held when strictly more than
    half are held, contradicted when strictly more than half are contradicted, else unresolved
    — with the one reason all share, or "groups disagree: h held, c contradicted, u unresolved
    of n" (a tie of held and contradicted is unresolved too). One verdict is returned as it is;
    none is unresolved with :data:`NO_VALUES`."""
    n = len(verdicts)
    if n == 0:
        return Verdict(UNRESOLVED, NO_VALUES)
    held = sum(v.value == HELD for v in verdicts)
    contradicted = sum(v.value == CONTRADICTED for v in verdicts)
    if 2 * held > n:
        return Verdict(HELD)
    if 2 * contradicted > n:
        return Verdict(CONTRADICTED)
    if n == 1:
        return verdicts[0]
    reasons = list(dict.fromkeys(v.reason for v in verdicts if not v.decided))
    if held == contradicted == 0 and len(reasons) == 1:
        return Verdict(UNRESOLVED, reasons[0])
    return Verdict(UNRESOLVED, f"{unit} disagree: {held} held, {contradicted} contradicted, "
                               f"{n - held - contradicted} unresolved of {n}")


def seed_slopes(x: np.ndarray, y: np.ndarray, seed: np.ndarray) -> dict[object, float]:
    """Per seed, the least-squares slope of log ``y`` on log ``x`` (y ∝ x^slope), over that
    seed's points with x > 0 and y > 0 (both finite): ``np.polyfit(log x, log y, 1)[0]``. A seed
    contributes a slope only with at least two distinct x; its several points at one x (if any)
    all enter the fit. Returns {seed: slope} in the seeds' sorted order."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    seed = np.asarray(seed)
    if not x.shape == y.shape == seed.shape:
        raise ValueError(f"x, y, seed shapes = {x.shape}, {y.shape}, {seed.shape}: must be equal")
    with np.errstate(invalid="ignore"):
        keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    out: dict[object, float] = {}
    for s in np.unique(seed[keep]):
        at = keep & (seed == s)
        lx, ly = np.log(x[at]), np.log(y[at])
        dx = lx - lx.mean()
        sxx = float(dx @ dx)
        if np.unique(lx).size >= 2 and sxx > 0:
            out[s.item() if hasattr(s, "item") else s] = float(dx @ (ly - ly.mean()) / sxx)
    return out
