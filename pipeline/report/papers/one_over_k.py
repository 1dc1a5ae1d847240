"""The O(1/k) law (SPEC.md §3, Proposition 1): k·(CE − R_k) against k and the slope, as values
(:func:`analyse`; :mod:`pipeline.report.papers.one_over_k_plot` draws them).

Reads the k-sweep rows of ``data/finite_k.parquet`` (one per cell, encoder and k; see
`pipeline.search.cell.search_cell`): the control-variate gap with its covariance across
k, the Proposition 1 window and the 1/k expansion c₁/k + c₂/k² + c₃/k³ (`pipeline.search.crn`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.report.grid.tables import plain
from pipeline.search import RESOLVED_Z, SlopeFit, fit_loglog_slope
from pipeline.search.regime import expansion_regime
from pipeline.stats.comparisons.inference import (
    CONTRADICTED,
    HELD,
    MIN_SEEDS,
    UNRESOLVED,
    Verdict,
    majority,
    normal_quantile,
    side_verdict,
    too_few_seeds,
)
from pipeline.stats.uncertainty import seed_ci

CSV_COLUMNS = ["k", "risk", "ce", "gap", "abs_gap", "gap_se", "window_low", "window_high",
               "k_gap", "k_gap_se", "resolved", "gap_expansion"]
LABELS = {"trained": "trained", "initial": "fixed φ (untrained)"}
COLORS = {"trained": "tab:blue", "initial": "tab:orange"}


def first_cell(finite_k: pd.DataFrame, grid: pd.DataFrame) -> str:
    """The cell the law is reported for: the first contrastive cell of the grid that has a sweep."""
    swept = set(finite_k.cell_id)
    return next(c for c in grid.cell_id if c in swept)


def _fit_range(part: pd.DataFrame) -> tuple[int | None, int | None]:
    def end(col: str) -> int | None:
        if col not in part:
            return None
        v = part[col].iloc[0]
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
    return end("fit_k_min"), end("fit_k_max")


def _slope(part: pd.DataFrame, gaps: np.ndarray, level: float,
           cov_column: str = "gap_cov") -> SlopeFit:
    """The fit of log|gaps| on log k over the sweep's declared range, with the covariance across k
    in ``cov_column`` when the rows carry it (else the gaps' se, as stated errors)."""
    k_min, k_max = _fit_range(part)
    k = part.k.to_numpy(float)
    if cov_column in part and part[cov_column].notna().all():
        cov = np.array([list(map(float, row)) for row in part[cov_column]])
        return fit_loglog_slope(k, gaps, gap_cov=cov, level=level, k_min=k_min, k_max=k_max)
    return fit_loglog_slope(k, gaps, part.gap_se.to_numpy(float), level, se_known=True,
                            k_min=k_min, k_max=k_max)


def _num(v: Any, digits: int = 5) -> float | None:
    """A JSON-safe rounded float (None for NaN)."""
    v = float(v)
    return None if math.isnan(v) else round(v, digits)


def _sig(v: Any) -> float | None:
    """A JSON-safe float to 3 significant digits (for p-values, which can be 1e-80)."""
    v = float(v)
    return None if math.isnan(v) else float(f"{v:.3g}")


def _expansion(part: pd.DataFrame, fit: SlopeFit, level: float, k_min: int | None,
               last: pd.Series) -> dict[str, Any]:
    """The expansion's numbers, only where its series is in its regime (pipeline.search.regime):
    the slope it predicts over the fitted range against the measured one, c₁ = lim k·(CE − R_k)
    with its interval against k·gap at the largest k, and the internal consistency check."""
    if "gap_expansion" not in part or not {"c1", "c2", "c3"} <= set(part):
        return {"regime": "no expansion computed"}
    start = k_min if k_min is not None else int(part.k.min())
    regime = expansion_regime(last.c1, last.c2, last.c3, start)
    if not regime.in_regime:
        return {"regime": regime.reason}
    z = normal_quantile(level)
    predicted = _slope(part, part.gap_expansion.to_numpy(float), level).slope
    c1, c1_se = float(last.c1), float(last.get("c1_se", math.nan))
    k_gap, k_gap_se = float(last.k * last.gap), float(last.k * last.gap_se)
    out: dict[str, Any] = {
        "regime": "in the asymptotic regime", "slope_expansion": _num(predicted),
        "slope_minus_expansion": _num(fit.slope - predicted),
        "expansion_in_slope_ci": bool(fit.ci_low <= predicted <= fit.ci_high),
        "c1": _num(c1), "c1_se": _num(c1_se), "c1_ci_low": _num(c1 - z * c1_se),
        "c1_ci_high": _num(c1 + z * c1_se), "c2": _num(last.c2), "c3": _num(last.c3),
        "k_gap_agrees_with_c1": bool(abs(k_gap - c1) <= z * math.hypot(k_gap_se, c1_se))}
    if "gap_leading" in part:  # −1 by construction: the expansion's code checked against itself
        lead = _slope(part, part.gap_leading.to_numpy(float), level, "gap_leading_cov")
        out["internal_check"] = {
            "what": "slope of gap − c₂/k² − c₃/k³ (same pool and positives): −1 by "
                    "construction, a consistency check of the expansion, not evidence",
            "slope_leading": _num(lead.slope), "ci_low": _num(lead.ci_low),
            "ci_high": _num(lead.ci_high),
            "covers_minus_one": bool(lead.ci_low <= -1.0 <= lead.ci_high)}
    return out


def fits(rows: pd.DataFrame, level: float) -> dict[str, dict[str, Any]]:
    """Per encoder: the measured slope of log|CE − R_k| on log k over the declared range with
    its interval (the raw slope, always), whether −1 is inside it, k·gap at the largest k, whether
    every k is resolved; and, only where the 1/k expansion is in its regime
    (:func:`pipeline.search.regime.expansion_regime`), the test of Proposition 1: the slope the
    expansion predicts over the same range against the measured one, and c₁ = lim k·(CE − R_k)
    with its interval. Elsewhere ``regime`` says "outside the asymptotic regime" and why."""
    out = {}
    for encoder, part in rows.groupby("encoder"):
        part = part.sort_values("k")
        fit = _slope(part, part.gap.to_numpy(float), level)
        entry: dict[str, Any] = {
            "slope": _num(fit.slope), "ci_low": _num(fit.ci_low), "ci_high": _num(fit.ci_high),
            "slope_se": _num(fit.slope_se, 6), "n_points": fit.n_points,
            "covers_minus_one": bool(fit.ci_low <= -1.0 <= fit.ci_high),
            "lack_of_fit_p": _sig(fit.lack_of_fit_p), "method": fit.method}
        z = np.abs(part.gap.to_numpy(float)) / part.gap_se.to_numpy(float)
        entry.update(resolved_all=bool(np.all(z >= RESOLVED_Z)), min_gap_over_se=_num(z.min(), 2))
        last = part.iloc[-1]
        entry.update(k_max=int(last.k), k_gap_at_k_max=_num(last.k * last.gap),
                     k_gap_se_at_k_max=_num(last.k * last.gap_se))
        entry.update(_expansion(part, fit, level, _fit_range(part)[0], last))
        out[str(encoder)] = entry
    return out


@dataclass(frozen=True)
class OneOverK:
    """The law's values for one cell: ``rows``, its sweep (what :func:`plot` draws); ``table``,
    ``reports/one_over_k.csv`` (a DVC plot: ``series`` names the encoder); ``fits``, per encoder
    (:func:`fits`); ``entry``, the ``one_over_k`` entry of the summary (None without a sweep)."""

    rows: pd.DataFrame = field(repr=False)
    table: pd.DataFrame = field(repr=False)
    fits: dict[str, dict[str, Any]]
    entry: dict[str, Any] | None
    level: float
    z: float = math.nan  # the normal quantile of ``level`` (the plot's bands)
    fit_k_min: int | None = None  # where the slope's fit starts (the plot's dotted line)


def analyse(finite_k: pd.DataFrame, grid: pd.DataFrame, level: float) -> OneOverK:
    """The law for the first contrastive cell with a sweep (:func:`first_cell`), intervals at
    ``level``; a grid without one gets an empty table (it keeps the DVC outputs complete)."""
    if not len(finite_k):
        empty = pd.DataFrame(columns=["encoder", *CSV_COLUMNS, "series"])
        return OneOverK(empty, empty, {}, None, level)
    cell = first_cell(finite_k, grid)
    rows = finite_k[finite_k.cell_id == cell].sort_values(["encoder", "k"])
    if "k_gap" not in rows:  # a sweep from before the CRN estimator
        rows = rows.assign(k_gap=rows.k * rows.gap, k_gap_se=rows.k * rows.gap_se,
                           resolved=rows.gap.abs() >= RESOLVED_Z * rows.gap_se)
    rows = rows.assign(abs_gap=rows.gap.abs())
    columns = [c for c in CSV_COLUMNS if c in rows]
    series = rows.encoder.map(lambda e: LABELS.get(str(e), str(e)))
    table = rows[["encoder", *columns]].assign(series=series)
    summary = fits(rows, level)
    k_min, k_max = _fit_range(rows)
    entry = {"cell_id": cell, "fit_k_min": k_min, "fit_k_max": k_max, "level": level,
             "resolved_z": RESOLVED_Z, **summary}
    return OneOverK(rows, table, summary, entry, level, normal_quantile(level), k_min)


# --- the law over seeds: a verdict about trained encoders (SPEC §7) -----------------------------

LAW_CLAIM = "|CE − R_k| falls like 1/k, not like 1/√k (Whiteley, Proposition 1)"
SLOW_RATE = -0.5  # the rate the claim is told apart from: log-log slope −1/2


@dataclass(frozen=True)
class SeedLaw:
    """The law over the seeds of one setting (the grid axes but ``seed`` of its contrastive
    cells): each seed's measured log-log slope of |CE − R_k| on k (the trained encoder, the
    sweep's fitted range) and whether its 1/k expansion is in its asymptotic regime
    (:func:`pipeline.search.regime.expansion_regime`), the Student-t interval of the slopes of
    the seeds in the regime, and the verdict: the claimed effect is slope − (−1/2) < 0, decided
    over those seeds (:func:`pipeline.stats.comparisons.inference.side_verdict`); with fewer than
    ``MIN_SEEDS`` seeds in the regime it is unresolved, outside the claim's conditions."""

    setting: dict[str, Any]
    slopes: dict[int, float]
    in_regime: dict[int, bool]
    slope: float
    low: float
    high: float
    covers_minus_one: bool
    verdict: Verdict

    def claim(self, dataset: str) -> dict[str, Any]:
        """The ``paper_claims`` entry of ``summary.json``."""
        where = ", ".join(f"{k} = {v}" for k, v in self.setting.items())
        return {"setting": f"{dataset} trained encoders" + (f" ({where})" if where else ""),
                "claim": LAW_CLAIM, "tested": self.verdict.decided, "groups": 1,
                "held": int(self.verdict.value == HELD),
                "contradicted": int(self.verdict.value == CONTRADICTED), "by_training": None,
                "verdict": self.verdict.value, "reason": self.verdict.reason,
                "seeds": len(self.slopes), "slope": _num(self.slope),
                "slope_lo": _num(self.low), "slope_hi": _num(self.high),
                "covers_minus_one": self.covers_minus_one,
                "seed_slopes": {str(s): _num(v) for s, v in self.slopes.items()},
                "seeds_in_regime": sum(self.in_regime.values()), "seeds_swept": len(self.slopes)}


def law_over_seeds(finite_k: pd.DataFrame, grid: pd.DataFrame,
                   level: float) -> list[SeedLaw]:
    """:class:`SeedLaw` per setting of the grid's contrastive cells with a trained sweep (none
    without a sweep or a ``seed`` column)."""
    if not len(finite_k) or "seed" not in grid or "encoder" not in finite_k:
        return []
    swept = grid[grid.cell_id.isin(set(finite_k.cell_id))]
    if "objective" in swept:
        swept = swept[swept.objective == "contrastive"]
    axes = [a for a in GRID_AXES if a in swept and a != "seed" and swept[a].nunique() > 1]
    groups = swept.groupby(axes, dropna=False) if axes else [((), swept)]
    trained = finite_k[finite_k.encoder == "trained"]
    out = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        slopes: dict[int, float] = {}
        regime: dict[int, bool] = {}
        for cell in part.itertuples():
            rows = trained[trained.cell_id == cell.cell_id].sort_values("k")
            if len(rows) < 2:
                continue
            entry = fits(rows.assign(encoder="trained"), level)["trained"]
            slopes[int(cell.seed)] = float(entry["slope"])
            regime[int(cell.seed)] = entry.get("regime") == "in the asymptotic regime"
        used = np.array([slopes[s] for s in slopes if regime[s]])
        ci = seed_ci(used, level) if used.size else None
        low, high = (ci.low, ci.high) if ci else (math.nan, math.nan)
        if used.size < MIN_SEEDS:
            why = (f"outside the claim's conditions: the 1/k expansion is in its asymptotic "
                   f"regime in {used.size} of {len(slopes)} seeds (pipeline.search.regime)")
            verdict = Verdict(UNRESOLVED, why if len(slopes) >= MIN_SEEDS
                              else too_few_seeds(len(slopes)))
        else:
            verdict = side_verdict(low - SLOW_RATE, high - SLOW_RATE, -1, int(used.size))
        out.append(SeedLaw({a: plain(v) for a, v in zip(axes, key, strict=True)}, slopes,
                           regime, ci.estimate if ci else math.nan, low, high,
                           bool(low <= -1.0 <= high), verdict))
    return out


def law_claim(laws: list[SeedLaw], dataset: str) -> dict[str, Any] | None:
    """One ``paper_claims`` entry for the grid: a setting's :meth:`SeedLaw.claim` where there is
    one, else the majority over the settings (:func:`pipeline.stats.comparisons.inference.majority`:
    held or contradicted in strictly more than half, else unresolved with the shared reason or the
    count), each setting's verdict listed under ``settings``; None without a sweep."""
    if not laws:
        return None
    if len(laws) == 1:
        return laws[0].claim(dataset)
    verdict = majority([law.verdict for law in laws], "settings")
    return {"setting": f"{dataset} trained encoders ({len(laws)} settings)", "claim": LAW_CLAIM,
            "tested": verdict.decided, "groups": len(laws),
            "held": sum(law.verdict.value == HELD for law in laws),
            "contradicted": sum(law.verdict.value == CONTRADICTED for law in laws),
            "by_training": None, "verdict": verdict.value, "reason": verdict.reason,
            "seeds": min(len(law.slopes) for law in laws),
            "settings": [law.claim(dataset) for law in laws]}
