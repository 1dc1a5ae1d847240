"""Write the suite leaderboard (:class:`pipeline.report.suite.board.SuiteBoard`): draw its figures
once, render every file, then write them under ``out``.

Files: ``suite.md``, ``suite.tex``, ``suite.html`` (self-contained: the same PNG bytes embedded),
``suite_tasks.csv`` (one row per (task, loss)), ``suite_aggregate.csv`` (one row per loss),
``suite_pairs.csv`` (one row per pair, as ``ranks.pairs_table``), and under ``plots/`` (PNG and
SVG): ``critical_difference`` (the losses that entered every task, over all tasks; absent with
fewer than 2 tasks or 2 such losses), ``performance_profile`` (the losses' profiles with the
tasks as blocks; absent under 2 losses), ``pareto`` (one panel per task), ``label_efficiency``
(one panel per labelled task with few-shot rows; absent without any). The notes say why a figure is
absent. Nothing here computes a value.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from pipeline.report.grid.ranks import profile_table  # noqa: E402
from pipeline.report.render.canvas import Drawing, save  # noqa: E402
from pipeline.report.render.cd_diagram import critical_difference  # noqa: E402
from pipeline.report.render.profile_plot import performance_profile  # noqa: E402
from pipeline.report.render.publish import write_files  # noqa: E402
from pipeline.report.suite.board import SuiteBoard  # noqa: E402
from pipeline.report.suite.render import to_html, to_latex, to_markdown  # noqa: E402
from pipeline.report.suite.values import COST  # noqa: E402

COLUMNS = 3  # panels per row of the per-task figures


def _colors(board: SuiteBoard) -> dict[str, str]:
    """One colour per loss, the same in every panel."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {loss: cycle[i % len(cycle)] for i, loss in enumerate(board.losses)}


def _panels(count: int) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(COLUMNS, count)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols + 1.5, 3.8 * rows), squeeze=False,
                             layout="constrained")
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.axis("off")
    return fig, flat[:count]


def _legend(fig: plt.Figure, board: SuiteBoard, marker: str, front: bool = False) -> None:
    """One legend for every panel: each loss in its colour (and the front's ring)."""
    handles = [Line2D([], [], marker=marker, linestyle="" if marker == "o" else "-", color=c,
                      label=loss) for loss, c in _colors(board).items()]
    if front:
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                              markeredgecolor="k", markersize=9, label="Pareto front"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)


def _xscale(ax: plt.Axes, values: pd.Series) -> None:
    """Log x when the values span more than a factor 10, else linear (readable ticks)."""
    x = values[values > 0]
    if len(x) and x.max() > 10 * x.min():
        ax.set_xscale("log")


def _label(board: SuiteBoard) -> str:
    m = board.primary
    return f"{m.label} (fraction)" if m.unit == "%" else m.label + (f" ({m.unit})" if m.unit
                                                                     else "")


def cd_figure(board: SuiteBoard) -> Drawing | None:
    """The critical-difference diagram of ``board.complete``; None when it has no ranking."""
    r = board.complete.ranking
    if r is None:
        return None
    return critical_difference(board.complete.table, r.cd, r.groups, name="loss",
                               title=f"Mean rank over {r.blocks_total} tasks ({len(r.methods)} "
                               f"losses; Nemenyi, α = {r.alpha:g})")


def profile_figure(board: SuiteBoard) -> Drawing | None:
    """The performance profiles of the losses, tasks as blocks; None without a comparison."""
    table = profile_table(board.cross)
    if not len(table):
        return None
    return performance_profile(table, name="loss", blocks="task", colors=_colors(board),
                               title=f"{board.primary.label}, min–max normalised per task "
                               f"({len(board.tasks)} tasks)")


def pareto_figure(board: SuiteBoard) -> Drawing | None:
    """The primary metric against training seconds (log x), one panel per task with points;
    the Pareto front ringed and joined; None when no task has a point."""
    drawn = {t: p for t, p in board.pareto.items() if len(p)}
    if not drawn:
        return None
    colors, metric = _colors(board), board.primary.name
    fig, axes = _panels(len(drawn))
    for ax, (task, table) in zip(axes, drawn.items(), strict=True):
        for loss, part in table.groupby("loss", sort=True):
            ax.scatter(part[COST], part[metric], s=24, alpha=0.8, label=str(loss),
                       color=colors.get(str(loss)))
        front = table[table["front"].astype(bool)].sort_values(COST)
        if len(front):
            ax.scatter(front[COST], front[metric], s=90, facecolors="none", edgecolors="k",
                       linewidths=1.2, label="Pareto front")
            ax.step(front[COST], front[metric], where="post", color="k", lw=0.8, alpha=0.6)
        _xscale(ax, table[COST])
        ax.set(title=task, xlabel="training time (s, mean over seeds)", ylabel=_label(board))
        ax.grid(alpha=0.3, which="both")
    _legend(fig, board, "o", front=True)
    return save(fig)


def label_efficiency_figure(board: SuiteBoard) -> Drawing | None:
    """Few-shot accuracy against shots (log x) per loss, the band over episodes, one panel per
    labelled task with few-shot rows; None without any."""
    if not board.fewshot:
        return None
    colors = _colors(board)
    fig, axes = _panels(len(board.fewshot))
    for ax, (task, lines) in zip(axes, board.fewshot.items(), strict=True):
        for loss, part in lines.groupby("loss", sort=True):
            part = part.sort_values("shots")
            color = colors.get(str(loss))
            ax.plot(part["shots"], part["mean"], marker="o", label=str(loss), color=color)
            band = part.dropna(subset=["lo", "hi"])
            if len(band):
                ax.fill_between(band["shots"], band["lo"], band["hi"], alpha=0.2, color=color)
        score = str(lines["score"].iloc[0]).replace("_", " ")
        ax.set_xscale("log", base=2)
        shots = sorted(lines["shots"].unique())
        ax.set_xticks(shots, [str(int(v)) for v in shots])
        ax.set(title=f"{task}: {score}", xlabel="labelled examples per class (shots)",
               ylabel="accuracy (fraction)")
        ax.grid(alpha=0.3)
    _legend(fig, board, ".")
    return save(fig)


CAPTIONS = {
    "critical_difference": "Critical-difference diagram across tasks (bars: not separated)",
    "performance_profile": "Performance profiles across tasks (band: bootstrap over seeds)",
    "pareto": "Primary metric against training time per task (ringed: Pareto front)",
    "label_efficiency": "Label efficiency: few-shot accuracy against shots (band: interval over "
                        "episodes)",
}


def render(board: SuiteBoard) -> dict[str, bytes]:
    """Every file as (path under the output folder, bytes), figures first."""
    files: dict[str, bytes] = {}
    shown: list[tuple[str, bytes]] = []
    for name, draw in (("critical_difference", cd_figure),
                       ("performance_profile", profile_figure), ("pareto", pareto_figure),
                       ("label_efficiency", label_efficiency_figure)):
        drawing = draw(board)
        if drawing is None:
            continue
        files[f"plots/{name}.png"], files[f"plots/{name}.svg"] = drawing.png, drawing.svg
        shown.append((CAPTIONS[name], drawing.png))
    paths = {CAPTIONS[n]: f"plots/{n}.png" for n in CAPTIONS if f"plots/{n}.png" in files}
    files["suite.md"] = to_markdown(board, paths).encode("utf-8")
    files["suite.tex"] = to_latex(board).encode("utf-8")
    files["suite.html"] = to_html(board, shown).encode("utf-8")
    for name, frame in (("suite_tasks.csv", board.per_task),
                        ("suite_aggregate.csv", board.aggregate),
                        ("suite_pairs.csv", board.pairs)):
        files[name] = _csv(frame)
    return files


def _csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def write_suite(board: SuiteBoard, out: Path) -> list[Path]:
    """Every file of :func:`render` under ``out`` (parents created); returns the paths."""
    return write_files(render(board), Path(out))
