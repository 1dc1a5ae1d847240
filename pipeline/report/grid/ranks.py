"""The comparison across conditions as tables: ``reports/ranks.csv``, ``reports/pairs.csv``, the
CD diagram's values, the leaderboard's tiers and the ``metrics.json`` summary.

The values of ``report.compare`` (default: the losses) are the methods; the blocks are the
combinations of the other grid axes that vary among the ok cells (seeds averaged within a block);
the score is ``report.primary``. The statistics are
:func:`pipeline.stats.comparisons.compare.compare`; this module only shapes its cells into the
``(blocks, methods, seeds)`` array and its results into rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.config import ReportConfig
from pipeline.metrics import Metric, is_metric, lookup
from pipeline.report.formatting import fmt_bounds, fmt_value, pct
from pipeline.report.grid.tables import axes_in, ok_cells, varying
from pipeline.seeding import numpy_generator
from pipeline.stats.comparisons.aggregates import AGGREGATES, aggregate_columns
from pipeline.stats.comparisons.compare import Comparison, compare
from pipeline.stats.comparisons.power import MAX_BLOCKS, MAX_SEEDS, POWER, Settle, settle
from pipeline.stats.comparisons.profiles import Profiles, performance_profiles

# the aggregates' columns come from the registry (pipeline.stats.comparisons.aggregates.AGGREGATES)
RANKS_COLUMNS = ("tier", "method", "mean_rank", *aggregate_columns(), "blocks", "blocks_missing",
                 "blocks_ranked", "scores")
PAIRS_COLUMNS = ("a", "b", "p_a_better", "p_a_better_lo", "p_a_better_hi", "blocks",
                 "rank_difference", "cd", "nemenyi", "wilcoxon_p", "wilcoxon_holm_p",
                 "wilcoxon_holm", "delta", "delta_lo", "delta_hi", "practically_equivalent",
                 "seeds_to_separate", "blocks_to_separate")


def gating_note(csv: str = "pairs.csv") -> str:
    """The note saying which of ``csv``'s decisions the omnibus test gates, and why."""
    return (f"In {csv}, nemenyi is gated by the omnibus test (it says differs only when "
            "Iman–Davenport rejects at α: Demšar's two-step procedure, whose post-hoc test "
            "follows a rejection); wilcoxon_holm is not (Holm's step-down already controls the "
            "family-wise error over all pairs; Benavoli et al. 2016). The tiers are gated too, "
            "whichever post-hoc test draws them.")


@dataclass(frozen=True)
class CrossComparison:
    """The comparison of the values of ``axis`` over the blocks of ``block_axes``.

    result: None when it cannot be made (``reason`` says why: fewer than 2 methods or no
    metric); metric: the score (``report.primary``); seeds: the most seeds of any cell.
    """

    axis: str
    metric: Metric | None
    block_axes: tuple[str, ...]
    blocks: tuple[tuple[Any, ...], ...]
    result: Comparison | None
    reason: str
    alpha: float
    level: float
    n_boot: int = 0  # report.bootstrap (0: not said)
    rope: float = 0.0  # report.rope: the smallest difference of interest (0: none)
    profiles: Profiles | None = None  # performance profiles, min–max per block (None: none)
    # (a, b) in rank order -> what would settle the pair (pipeline.stats.comparisons.power; empty:
    # none)
    settled: Mapping[tuple[str, str], Settle] = field(default_factory=dict)


def score_array(cells: pd.DataFrame, axis: str, metric: str,
                block_axes: list[str]) -> tuple[np.ndarray, list[str], list[tuple[Any, ...]]]:
    """``(N, m, S)`` scores (NaN: missing), the method names and the block keys."""
    methods = [str(v) for v in sorted(cells[axis].dropna().unique(), key=str)]
    if block_axes:
        keyed = cells.groupby(block_axes, dropna=False, sort=True)
        parts = [(k if isinstance(k, tuple) else (k,), p) for k, p in keyed]
    else:
        parts = [((), cells)]
    seeds = max(int(p.groupby(axis).size().max()) for _, p in parts)
    scores = np.full((len(parts), len(methods), seeds), np.nan)
    for i, (_, part) in enumerate(parts):
        for j, name in enumerate(methods):
            x = part.loc[part[axis].astype(str) == name, metric].to_numpy(float)
            scores[i, j, : x.size] = x
    return scores, methods, [k for k, _ in parts]


def cross_compare(cells: pd.DataFrame, cfg: ReportConfig) -> CrossComparison:
    """The comparison ``cfg.compare`` asks for, on ``cfg.primary``, of the ok cells."""
    axis, name = cfg.compare, cfg.primary
    good = ok_cells(cells)
    if axis == "loss" and "objective" in good:  # a supervised cell trains no contrastive loss
        good = good[good.objective == "contrastive"]
    metric = lookup(name) if is_metric(name) and name in good else None

    def none(reason: str) -> CrossComparison:
        return CrossComparison(axis, metric, (), (), None, reason, cfg.alpha, cfg.level)

    if metric is None or not metric.ranked:
        return none(f"report.primary = {name!r} is not a ranked metric of these cells")
    good = good[good[name].notna()]
    if axis not in good or good[axis].nunique() < 2:
        return none(f"report.compare = {axis!r}: fewer than 2 values among the ok cells")
    block_axes = [a for a in varying(good, axes_in(good)) if a not in (axis, "seed")]
    scores, methods, blocks = score_array(good, axis, name, block_axes)
    rng = numpy_generator("report.compare", axis, name)
    result = compare(scores, methods, bool(metric.higher), rng, alpha=cfg.alpha, level=cfg.level,
                     n_boot=cfg.bootstrap)
    profiles = performance_profiles(scores, methods, bool(metric.higher), cfg.bootstrap,
                                    numpy_generator("report.profile", axis, name), cfg.level)
    return CrossComparison(axis, metric, tuple(block_axes), tuple(blocks), result, "", cfg.alpha,
                           cfg.level, cfg.bootstrap, cfg.rope, profiles,
                           settle_pairs(scores, methods, result, cfg.rope))


def separated(result: Comparison, a: str, b: str) -> bool:
    """Whether the ranking tells ``a`` and ``b`` apart (the decision its tiers use)."""
    r = result.ranking
    t = r.pair(a, b)
    return bool(r.separated and (t.nemenyi_differs if r.posthoc == "nemenyi"
                                 else t.wilcoxon_differs))


def settle_pairs(scores: np.ndarray, methods: list[str], result: Comparison,
                 rope: float) -> dict[tuple[str, str], Settle]:
    """Per pair (a before b in rank order): :func:`pipeline.stats.comparisons.power.settle` of a's
    ``(blocks, seeds)`` scores against b's, at the comparison's α and level."""
    r, index = result.ranking, {name: j for j, name in enumerate(methods)}
    names = [r.methods[j] for j in r.order]
    return {(a, b): settle(scores[:, index[a]], scores[:, index[b]], r.alpha, result.level, rope)
            for i, a in enumerate(names) for b in names[i + 1:]}


def ranks_table(cc: CrossComparison) -> pd.DataFrame:
    """``ranks.csv``: one row per method, best mean rank first."""
    if cc.result is None:
        return pd.DataFrame(columns=list(RANKS_COLUMNS))
    r = cc.result.ranking
    rows = []
    for j in r.order:
        agg = cc.result.methods[j]
        rows.append({"tier": r.tier[j], "method": r.methods[j], "mean_rank": r.mean_rank[j],
                     **agg.values, "blocks": agg.blocks, "blocks_missing": agg.blocks_missing,
                     "blocks_ranked": r.blocks_complete, "scores": agg.scores})
    return pd.DataFrame(rows, columns=list(RANKS_COLUMNS)).rename(columns={"method": cc.axis})


def profile_table(cc: CrossComparison) -> pd.DataFrame:
    """The performance-profile figure's table: one row per method (best mean rank first) and τ:
    ``<axis>, tau, fraction, low, high, gap`` (gap: the method's optimality gap at γ = 1);
    empty without profiles."""
    columns = [cc.axis, "tau", "fraction", "low", "high", "gap"]
    if cc.result is None or cc.profiles is None:
        return pd.DataFrame(columns=columns)
    r, p = cc.result.ranking, cc.profiles
    parts = [pd.DataFrame({cc.axis: r.methods[j], "tau": p.tau, "fraction": p.profiles[j].fraction,
                           "low": p.profiles[j].low, "high": p.profiles[j].high,
                           "gap": p.gaps[j].gap.estimate}) for j in r.order]
    return pd.concat(parts, ignore_index=True)[columns]


def pairs_table(cc: CrossComparison) -> pd.DataFrame:
    """``pairs.csv``: one row per pair, a before b in rank order. ``nemenyi`` is gated by the
    omnibus test, ``wilcoxon_holm`` is not (:func:`gating_note` says why)."""
    if cc.result is None:
        return pd.DataFrame(columns=list(PAIRS_COLUMNS))
    r, rows = cc.result.ranking, []
    names = [r.methods[j] for j in r.order]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            t, imp = r.pair(a, b), cc.result.improvement(a, b)
            rows.append({"a": a, "b": b, "p_a_better": imp.probability.estimate,
                         "p_a_better_lo": imp.probability.low,
                         "p_a_better_hi": imp.probability.high, "blocks": t.blocks,
                         "rank_difference": t.rank_difference, "cd": r.cd,
                         "nemenyi": "differs" if t.nemenyi_differs else "not separated",
                         "wilcoxon_p": t.wilcoxon_p, "wilcoxon_holm_p": t.holm_p,
                         "wilcoxon_holm": "differs" if t.wilcoxon_differs else "not separated",
                         **_settle_row(cc, a, b)})
    frame = pd.DataFrame(rows, columns=list(PAIRS_COLUMNS))
    for c in ("seeds_to_separate", "blocks_to_separate"):
        frame[c] = frame[c].astype("Int64")
    return frame


def _settle_row(cc: CrossComparison, a: str, b: str) -> dict[str, Any]:
    """pairs.csv's power columns: delta (a − b, mean over blocks of the seed means) and its
    interval; whether it is practically equivalent (inside ±report.rope); the seeds per block,
    and the blocks (at the seeds there are), for 80% power, only for pairs the ranking does not
    separate and that are not practically equivalent."""
    s = cc.settled.get((a, b))
    if s is None or cc.result is None:
        return {"delta": np.nan, "delta_lo": np.nan, "delta_hi": np.nan,
                "practically_equivalent": pd.NA, "seeds_to_separate": pd.NA,
                "blocks_to_separate": pd.NA}
    ask = not s.practically_equivalent and not separated(cc.result, a, b)
    return {"delta": s.fit.delta, "delta_lo": s.fit.delta_low, "delta_hi": s.fit.delta_high,
            "practically_equivalent": s.practically_equivalent,
            "seeds_to_separate": s.seeds if ask and s.seeds is not None else pd.NA,
            "blocks_to_separate": s.blocks if ask and s.blocks is not None else pd.NA}


def summary(cc: CrossComparison) -> dict[str, Any]:
    """The ``metrics.json`` part (flattened there as ``compare_*``)."""
    if cc.result is None:
        return {}
    r = cc.result.ranking
    out: dict[str, Any] = {
        "blocks": r.blocks_total, "blocks_ranked": r.blocks_complete, "seeds": cc.result.seeds,
        "friedman_p": r.friedman.chi2_p, "iman_davenport_p": r.friedman.iman_davenport_p,
        "cd": r.cd, "tiers": max(r.tier)}
    for j, name in enumerate(r.methods):
        agg = cc.result.methods[j]
        out[name] = {"mean_rank": float(r.mean_rank[j]), "tier": r.tier[j],
                     "iqm": agg.iqm.estimate, "win_rate": agg.win_rate,
                     "p_rank1": agg.values["p_rank1"]}
    return out


def tier_of(cc: CrossComparison) -> dict[str, int]:
    """Method name → its tier (empty without a comparison)."""
    if cc.result is None:
        return {}
    r = cc.result.ranking
    return dict(zip(r.methods, r.tier, strict=True))


def tiers_text(cc: CrossComparison) -> str:
    """One line: the tiers in order, ``{a, b} > {c}``, or why there is no comparison."""
    if cc.result is None:
        return f"No comparison across settings: {cc.reason}."
    r = cc.result.ranking
    by_tier: dict[int, list[str]] = {}
    for j in r.order:
        by_tier.setdefault(r.tier[j], []).append(r.methods[j])
    return " > ".join("{" + ", ".join(v) + "}" for _, v in sorted(by_tier.items()))


def notes(cc: CrossComparison) -> list[str]:
    """The leaderboard's sentences about the comparison (what it is over, what it says)."""
    if cc.result is None:
        return [f"No ranking of {cc.axis} across settings: {cc.reason}."]
    r, m = cc.result.ranking, cc.metric
    assert m is not None
    over = " × ".join(cc.block_axes) or "one setting"
    f = r.friedman
    test = (f"Friedman χ² = {fmt_value(f.chi2)}, p = {fmt_value(f.chi2_p)}; Iman–Davenport "
            f"p = {fmt_value(f.iman_davenport_p)}") if np.isfinite(f.chi2_p) else \
        "Friedman test: needs 2 or more complete settings"
    verdict = (f"tiers {tiers_text(cc)}" if r.separated else
               f"the {len(r.methods)} values of {cc.axis} cannot be separated at α = {r.alpha:g}"
               " (one tier)")
    lines = [f"Tier: {cc.axis} values that the {r.blocks_complete} settings ({over}; seeds "
             f"averaged) cannot tell apart on {m.label} ({m.better} is better): {test}; "
             f"Nemenyi CD = {fmt_value(r.cd)} mean ranks; {verdict}. The # column ranks "
             "within this table only; ranks.csv, pairs.csv and the CD diagram have the rest.",
             gating_note()]
    if cc.result.seeds < 2:
        lines.append("IQM and P(A > B) intervals: one seed per cell, so none (they are over "
                     "seeds).")
    else:
        lines.append(f"IQM and P(A > B) intervals in ranks.csv / pairs.csv: {pct(cc.level)} "
                     "stratified bootstrap over seeds (resampled within each setting).")
    boot = f", {cc.n_boot} resamples" if cc.n_boot else ""
    lines += [f"{a.note[:-1]} ({pct(cc.level)}{boot}; ranks.csv {', '.join(a.columns)})."
              for a in AGGREGATES if a.note]
    lines += power_notes(cc)
    missing = [a.method for a in cc.result.methods if a.blocks_missing]
    if missing:
        lines.append(f"Left out, not filled in: settings without a cell of {', '.join(missing)} "
                     "(counted in ranks.csv, blocks_missing).")
    return lines


def _effect(m: Metric, delta: float) -> str:
    """A difference on the metric's scale: points for a % metric."""
    return f"{m.scale(delta):+.2g}" + (" points" if m.unit == "%" else f" {m.unit}".rstrip())


def power_notes(cc: CrossComparison, block: str = "setting",
                csv: str = "pairs.csv") -> list[str]:
    """What would settle each adjacent pair in rank order that the ranking does not separate:
    practically equivalent (inside ±report.rope), or the seeds per setting, or the settings,
    for 80% power (:mod:`pipeline.stats.comparisons.power`); ``block``: what a block is called
    ("task");
    ``csv``: the pairs file."""
    if cc.result is None or not cc.settled:
        return []
    r, m = cc.result.ranking, cc.metric
    assert m is not None
    names = [r.methods[j] for j in r.order]
    rope = (f"practically equivalent inside ±{_effect(m, cc.rope)[1:]} (report.rope; Benavoli "
            "et al. 2017)" if cc.rope > 0 else "no region of practical equivalence (report.rope "
            "= 0)")
    lines = [f"What would settle it ({csv}): for adjacent pairs not separated, the seeds per "
             f"{block} or the {block}s for {pct(POWER)} power of a paired t-test over {block}s at "
             f"α = {r.alpha:g} at the observed difference (fitted between-seed and "
             f"between-{block} variances); {rope}."]
    for a, b in zip(names, names[1:], strict=False):
        s = cc.settled.get((a, b))
        if s is None or separated(cc.result, a, b):
            continue
        if s.practically_equivalent:
            lines.append(f"{a} and {b}: practically equivalent ({pct(cc.level)} interval of the "
                         f"difference [{_effect(m, s.fit.delta_low)}, "
                         f"{_effect(m, s.fit.delta_high)}]); no compute asked.")
            continue
        at = f"To separate {a} from {b} at this effect ({_effect(m, s.fit.delta)})"
        more = (f", or about {s.blocks} {block}s at {s.fit.seeds:.3g} seeds" if s.blocks else "")
        if s.seeds is not None and s.seeds <= s.fit.seeds:
            t = r.pair(a, b)
            need = math.ceil(len(r.methods) * (len(r.methods) + 1) / 6.0
                             * (r.q_alpha / abs(t.rank_difference)) ** 2) \
                if t.rank_difference else None
            lines.append(f"{a} against {b} ({_effect(m, s.fit.delta)}): a paired t-test over "
                         f"these {block}s has {pct(POWER)} power already; the rank test does not "
                         "separate them" + (f" (its CD reaches their rank difference at about "
                                            f"{need} {block}s)." if need else "."))
        elif s.seeds is not None:
            lines.append(f"{at}: about {s.seeds} seeds per {block}{more}.")
        elif s.blocks is not None:
            why = ("one seed per cell: the seeds' part is unknown" if
                   not np.isfinite(s.fit.sigma2_seed) else f"it varies across {block}s")
            lines.append(f"{at}: about {s.blocks} {block}s at {s.fit.seeds:.3g} seeds; seeds "
                         f"alone would not ({why}).")
        else:
            lines.append(f"{at}: not within {MAX_SEEDS} seeds per {block} or {MAX_BLOCKS} "
                         f"{block}s (the observed difference is about zero).")
    return lines


def _board_cells(row: Any, m: Metric, seeds: str, level: float) -> list[tuple[str, str]]:
    """(header, text) of each registry entry shown in the board's table, for one ranks row."""
    unit = " (%)" if m.unit == "%" else ""
    cells: list[tuple[str, str]] = []
    for a in (a for a in AGGREGATES if a.board):
        if a.kind == "seeds":
            est, lo, hi = (getattr(row, c) for c in a.columns)
            cells.append((f"{a.label} {m.label}{unit}{seeds}", fmt_bounds(est, lo, hi, m)))
            continue
        cols = list(a.columns)
        i = 0
        while i < len(cols):
            v = getattr(row, cols[i])
            if cols[i].endswith("_lo") and i + 1 < len(cols) and cols[i + 1].endswith("_hi"):
                hi = getattr(row, cols[i + 1])
                text = f"[{v:{a.format}}, {hi:{a.format}}]" if np.isfinite([v, hi]).all() \
                    else "–"
                cells.append((f"{a.headers[i]} [{pct(level)}]", text))
                i += 2
                continue
            cells.append((a.headers[i], format(v, a.format) if a.format else fmt_value(v)))
            i += 1
    return cells


def display(cc: CrossComparison) -> tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The board's table of the comparison: (title, header, rows as text), best first; the
    aggregates shown are the registry's entries with ``board`` set."""
    table = ranks_table(cc)
    if cc.result is None or not len(table):
        return ("", (), ())
    m = cc.metric
    assert m is not None
    seeds = f" [{pct(cc.level)} over seeds]" if cc.result.seeds > 1 else " (1 seed: no interval)"
    shown = [_board_cells(r, m, seeds, cc.level) for r in table.itertuples()]
    header = (cc.axis, "Tier", "Mean rank", *(h for h, _ in shown[0]), "Settings (missing)")
    rows = tuple((str(getattr(r, cc.axis)), fmt_value(r.tier), f"{r.mean_rank:.2f}",
                  *(t for _, t in cells), f"{r.blocks} ({r.blocks_missing})")
                 for r, cells in zip(table.itertuples(), shown, strict=True))
    title = (f"{cc.axis} across {cc.result.ranking.blocks_total} settings "
             f"({' × '.join(cc.block_axes) or 'one setting'}), on {m.label}")
    return (title, header, rows)
