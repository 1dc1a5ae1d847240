"""Report figures (matplotlib, Agg). Each takes a table and returns a
:class:`~pipeline.report.render.canvas.Drawing`: its PNG and SVG bytes, rendered once by
:func:`~pipeline.report.render.canvas.save`; the caller writes them (:meth:`Drawing.write`) and
embeds the same PNG bytes in HTML.
The error bars come computed (:class:`~pipeline.report.grid.figure_plan.ErrorBars`: means and
intervals over the cells at each point); nothing here computes a statistic.

:func:`plan` decides which figures a run gets (pure: :class:`FigureSpec` values) and :func:`draw`
draws one. The number of figures and of lines per figure is bounded whatever the grid size: a
figure draws at most ``MAX_LINES`` series (the hue axes are chosen so), and averages over the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import is_metric, lookup
from pipeline.report.formatting import axis_header
from pipeline.report.grid.figure_plan import (
    CV_AXES,
    MAX_LINES,
    ErrorBars,
    FigureSpec,
    LineSet,
    hue_axes,
    norm_cells,
    plan,
)
from pipeline.report.grid.tables import check_columns
from pipeline.report.render.canvas import Drawing, plt, save
from pipeline.report.render.cd_diagram import critical_difference
from pipeline.report.render.profile_plot import performance_profile
from pipeline.report.render.rank_interval_plot import rank_intervals


def _ylabel(metric: str) -> str:
    """The registry's label (fractions stay fractions on the axis), else the column name."""
    if not is_metric(metric):
        return metric
    m = lookup(metric)
    return (f"{m.label} (fraction)" if m.unit == "%"
            else m.label + (f" ({m.unit})" if m.unit else ""))


def _label(key: tuple, names: Sequence[str]) -> str:
    return " · ".join(f"{v}" if n in ("loss", "arch") else f"{n}={v}"
                      for n, v in zip(names, key, strict=True)) or "all"


def _lines(ax: plt.Axes, lines: LineSet, hue: Sequence[str], linestyle: str = "-",
           colors: Sequence[str] | None = None) -> list[str]:
    """One error-bar line per hue group of ``lines``; returns the colours used, in group order."""
    suffix = f" ({lines.tag})" if lines.tag else ""
    used = []
    for i, line in enumerate(lines.lines):
        pts = line.points
        x = pts.columns[0]
        err = np.vstack([pts["mean"] - pts["lo"], pts["hi"] - pts["mean"]])
        bars = ax.errorbar(pts[x], pts["mean"], yerr=np.nan_to_num(err), marker="o", capsize=3,
                           label=_label(line.key, hue) + suffix, linestyle=linestyle,
                           color=colors[i] if colors else None)
        used.append(matplotlib.colors.to_hex(bars.lines[0].get_color()))
    return used


def metric_vs(bars: ErrorBars, axis: str = "n", metric: str = "cv",
              facet: str | None = None) -> Drawing:
    """Thin-shell CV (or ``metric``) against ``axis``: the lines of
    :func:`~pipeline.report.grid.figure_plan.metric_panels`, one panel each (titled by ``facet``'s
    value); log x axis. A panel's later sets (the untrained control) are dashed, in the
    colours of its first."""
    fig, axes = plt.subplots(1, len(bars.panels), figsize=(6 * len(bars.panels), 4),
                             sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], bars.panels, strict=True):
        first, *rest = panel.sets
        colors = _lines(ax, first, bars.hue)
        for dashed in rest:
            _lines(ax, dashed, bars.hue, linestyle="--", colors=colors)
        ax.set_xscale("log", base=2)
        symbol = axis_header(axis)
        ax.set(xlabel=axis if symbol == axis else f"{axis} ({symbol})",
               title=f"{axis_header(facet)} = {panel.value}" if facet else None)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(_ylabel(metric))
    axes[0][-1].legend(fontsize=7)
    return save(fig)


def fewshot_vs_shots(bars: ErrorBars) -> Drawing:
    """Accuracy against labelled examples per class (log x axis): the panels of
    :func:`~pipeline.report.grid.figure_plan.fewshot_panels`, one solid line per loss and the raw
    inputs' later sets dashed in black."""
    fig, axes = plt.subplots(1, len(bars.panels), figsize=(6 * len(bars.panels), 4),
                             sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], bars.panels, strict=True):
        first, *rest = panel.sets
        _lines(ax, first, bars.hue)
        for dashed in rest:
            for line in dashed.lines:
                pts = line.points
                err = np.vstack([pts["mean"] - pts["lo"], pts["hi"] - pts["mean"]])
                ax.errorbar(pts["shots"], pts["mean"], yerr=np.nan_to_num(err), marker="s",
                            capsize=3, linestyle="--", color="black", label=dashed.tag)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="labelled examples per class (shots)", title=_ylabel(str(panel.value)))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy (fraction)")
    axes[0][-1].legend(fontsize=7)
    return save(fig)


def pass_rate_vs_epoch(bars: ErrorBars) -> Drawing:
    """AD and DP pass rates (%) against epoch: the two panels of
    :func:`~pipeline.report.grid.figure_plan.pass_rate_panels`, one line style per
    representation."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, panel in zip(axes, bars.panels, strict=True):
        for lines, style in zip(panel.sets, ("-", "--", ":", "-."), strict=False):
            _lines(ax, lines, bars.hue, linestyle=style)
    for ax, name in zip(axes, ("Anderson–Darling", "D'Agostino–Pearson"), strict=True):
        ax.set(xlabel="epoch", title=f"{name}: coordinates passing", ylim=(-2, 102))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("pass rate (%)")
    axes[1].legend(fontsize=7)
    return save(fig)


def norm_histograms(norms_by_label: Mapping[str, np.ndarray],
                    bins: int = 50) -> Drawing:
    """Overlaid density histograms of embedding norms ‖z‖, one per label (e.g. variant)."""
    if not norms_by_label:
        raise ValueError("norms_by_label: empty; expected {label: array of norms}")
    values = np.concatenate([np.asarray(v, float).ravel() for v in norms_by_label.values()])
    edges = np.histogram_bin_edges(values[np.isfinite(values)], bins=bins)
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, norms in norms_by_label.items():
        ax.hist(np.asarray(norms, float).ravel(), bins=list(edges), density=True, histtype="step",
                linewidth=1.5, label=str(label))
    ax.set(xlabel="‖z‖", ylabel="density")
    ax.legend(fontsize=8)
    return save(fig)


def gap_vs_k(df: pd.DataFrame, hue: Sequence[str] = ()) -> Drawing:
    """|CE − R_k| against k on log-log axes with ±1 s.e. bars (``gap_se`` if present), and
    reference lines ∝ 1/k and ∝ 1/√k through the smallest k's mean."""
    check_columns(df, ["k", "gap"], "df columns")
    check_columns(df, list(hue), "hue")
    data = df.assign(abs_gap=df["gap"].abs(), se=df["gap_se"] if "gap_se" in df else np.nan)
    fig, ax = plt.subplots(figsize=(6, 4))
    groups = data.groupby(list(hue)) if hue else [((), data)]
    for key, part in groups:
        agg = part.groupby("k").agg(g=("abs_gap", "mean"), se=("se", lambda s: np.sqrt(
            np.nansum(s**2)) / max(len(s), 1) if s.notna().any() else np.nan)).reset_index()
        key = key if isinstance(key, tuple) else (key,)
        ax.errorbar(agg.k, agg.g, yerr=np.nan_to_num(agg.se), marker="o", capsize=3,
                    label=_label(key, hue) if hue else "|CE − R_k|")
    ks = np.sort(data["k"].unique()).astype(float)
    first = data.loc[data.k == ks[0], "abs_gap"].mean()
    ax.plot(ks, first * ks[0] / ks, "k--", linewidth=1, label="∝ 1/k")
    ax.plot(ks, first * np.sqrt(ks[0] / ks), "k:", linewidth=1, label="∝ 1/√k")
    ax.set(xscale="log", yscale="log", xlabel="negatives k", ylabel="|CE − R_k|")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return save(fig)


def gap_vs_epoch(gaps: pd.DataFrame) -> Drawing:
    """Contrastive − supervised against epoch
    (:func:`pipeline.report.papers.epoch_gap.gap_by_epoch`): one panel per statistic, one line
    per layer, bars the interval over seeds; zero dotted."""
    stats = list(dict.fromkeys(gaps.stat))
    fig, axes = plt.subplots(1, len(stats), figsize=(5 * len(stats), 4), squeeze=False)
    for ax, stat in zip(axes[0], stats, strict=True):
        for layer, part in gaps[gaps.stat == stat].groupby("layer", sort=True):
            part = part.sort_values("epoch")
            err = np.vstack([part.difference - part.difference_lo,
                             part.difference_hi - part.difference]).clip(min=0)
            ax.errorbar(part.epoch, part.difference, yerr=np.nan_to_num(err), marker="o",
                        capsize=3, label=str(layer))
        ax.axhline(0, color="grey", linestyle=":", linewidth=1)
        ax.set(xlabel="epoch", ylabel=f"contrastive − supervised: {_ylabel(stat)}",
               title=lookup(stat).label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save(fig)


def bound_terms(df: pd.DataFrame, terms: Sequence[str] | None = None,
                label_cols: Sequence[str] | None = None) -> Drawing:
    """Stacked bars of the bound's terms, one bar per row (positive terms up, negative down);
    ``bound`` and ``gap`` columns, when present, are drawn as markers on each bar.

    terms: None means every numeric column that is not a grid axis, ``bound``, ``gap``,
    ``tightness`` or a ``*_se``; label_cols: None means the grid axes present.
    """
    skip = {*GRID_AXES, "bound", "gap", "tightness"}
    terms = list(terms if terms is not None else [
        c for c in df.columns if c not in skip and not c.endswith("_se")
        and pd.api.types.is_numeric_dtype(df[c])])
    if not terms:
        raise ValueError("terms: no numeric term columns found; pass terms=[...] explicitly")
    check_columns(df, terms, "terms", numeric=True)
    label_cols = list(label_cols if label_cols is not None else [a for a in GRID_AXES if a in df])
    labels = [_label(tuple(r), label_cols) for r in df[label_cols].itertuples(index=False)]
    x = np.arange(len(df))
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(df) + 2), 4))
    up, down = np.zeros(len(df)), np.zeros(len(df))
    for term in terms:
        v = df[term].to_numpy(float)
        base = np.where(v >= 0, up, down)
        ax.bar(x, v, bottom=base, label=term)
        up, down = up + np.clip(v, 0, None), down + np.clip(v, None, 0)
    for col, mark in (("bound", "k_"), ("gap", "rx")):
        if col in df:
            ax.plot(x, df[col].to_numpy(float), mark, markersize=12, label=col)
    ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=7)
    ax.axhline(0, color="k", linewidth=0.5)
    ax.set_ylabel("bound terms")
    ax.legend(fontsize=7)
    return save(fig)


def variant_comparison(table: pd.DataFrame, metric: str,
                       keys: Sequence[str] | None = None) -> Drawing:
    """Bars of ``<metric>_mean`` per ``aggregate`` row with the interval as error bars,
    coloured by loss variant when the table has a ``loss`` column; bars are labelled by the
    ``keys`` (default: the table's group columns) that differ between them."""
    if f"{metric}_mean" not in table:
        have = [c[:-5] for c in table.columns if c.endswith("_mean")]
        raise ValueError(f"metric = {metric!r}: not in the table; allowed: {', '.join(have)}")
    keys = list(keys if keys is not None else table.attrs.get("group_by", []))
    keys = [k for k in keys if table[k].nunique() > 1] or keys[:1]  # what tells the bars apart
    labels = [_label(tuple(r), keys) for r in table[keys].itertuples(index=False)]
    mean = table[f"{metric}_mean"].to_numpy(float)
    err = np.vstack([mean - table[f"{metric}_lo"].to_numpy(float),
                     table[f"{metric}_hi"].to_numpy(float) - mean])
    variants = list(dict.fromkeys(table["loss"])) if "loss" in table else []
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = ([cycle[variants.index(v) % len(cycle)] for v in table["loss"]] if variants
              else None)
    fig, ax = plt.subplots(figsize=(max(5, 0.45 * len(table) + 2), 4))
    ax.bar(np.arange(len(table)), mean, yerr=np.nan_to_num(err), capsize=3, color=colors)
    ax.set_xticks(np.arange(len(table)), labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(_ylabel(metric))
    ax.grid(alpha=0.3, axis="y")
    return save(fig)


def pareto(table: pd.DataFrame, metric: str, cost: str = "train_seconds") -> Drawing:
    """``metric`` against ``cost`` (log x): the points of
    :func:`~pipeline.report.grid.figure_plan.cost_points`, one colour per loss; the Pareto front's
    points ringed and joined by a step line (cheapest first)."""
    check_columns(table, [cost, metric, "front"], "table columns")
    fig, ax = plt.subplots(figsize=(6, 4))
    groups = table.groupby("loss", sort=True) if "loss" in table else [("all", table)]
    for name, part in groups:
        ax.scatter(part[cost], part[metric], s=24, alpha=0.8, label=str(name))
    front = table[table["front"].astype(bool)].sort_values(cost)
    if len(front):
        ax.scatter(front[cost], front[metric], s=90, facecolors="none", edgecolors="k",
                   linewidths=1.2, label="Pareto front")
        ax.step(front[cost], front[metric], where="post", color="k", linewidth=0.8, alpha=0.6)
    ax.set_xscale("log")
    ax.set(xlabel=_ylabel(cost), ylabel=_ylabel(metric))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return save(fig)


def draw(spec: FigureSpec, norms: Mapping[str, np.ndarray] | None = None) -> Drawing:
    """Draw ``spec``; norms: cell id → its held-out embedding norms (needed by
    ``norm_histograms`` only, for the cells :func:`norm_cells` names)."""
    if spec.kind == "norm_histograms":
        if norms is None:
            raise ValueError("norms: needed to draw the norm histograms (cell id -> norms)")
        table = spec.data
        if not isinstance(table, pd.DataFrame):
            raise ValueError(f"{spec.name}: norm_histograms draws a table of (label, cell_id)")
        return norm_histograms({r.label: norms[r.cell_id] for r in table.itertuples()})
    return DRAW[spec.kind](spec.data, **spec.options)


__all__ = ["CV_AXES", "DRAW", "MAX_LINES", "Drawing", "FigureSpec", "draw", "hue_axes",
           "norm_cells", "plan", "save"]

DRAW: dict[str, Callable[..., Drawing]] = {
    "metric_vs": metric_vs, "pass_rate_vs_epoch": pass_rate_vs_epoch,
    "fewshot_vs_shots": fewshot_vs_shots,
    "variant_comparison": variant_comparison, "bound_terms": bound_terms, "gap_vs_k": gap_vs_k,
    "gap_vs_epoch": gap_vs_epoch,
    "critical_difference": critical_difference, "pareto": pareto,
    "rank_intervals": rank_intervals, "performance_profile": performance_profile}
