"""``cbench diff A B``: what changed between two releases, or a release and the workspace.

- **Cells**: added, removed, and retrained by other code (same cell id, another version: the
  code or the dataset that makes the cell changed), from each side's ``results.json``.
- **Numbers**: each leaderboard setting's headline metric (``leaderboard.csv``: mean and
  interval over seeds) *moved* when either side's mean lies outside the other side's interval;
  with one seed there is no interval, and any change counts. Settings present on one side only
  are listed as such.
- **Rankings**: each loss's tier and mean rank (``ranks.csv``); a tier that changed, or an order
  of mean ranks that changed, is listed.

:func:`to_markdown` writes it for a pull-request comment; ``--fail-on-change`` turns any
change into a non-zero exit status (a CI gate for a whole leaderboard, as MLflow's
``MetricThreshold`` is for one model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.grid import GRID_AXES
from pipeline.metrics import METRICS, lookup
from pipeline.release.bundle import REPORTS, Release, ReleaseError, read_release, read_table
from pipeline.release.results import results_document


@dataclass(frozen=True)
class Side:
    """One side of a diff: its label, its cells, its leaderboard and its ranks."""

    label: str
    cells: list[dict[str, Any]]
    leaderboard: pd.DataFrame
    ranks: pd.DataFrame


@dataclass(frozen=True)
class Moved:
    setting: str
    metric: str
    a: float
    a_interval: tuple[float, float] | None
    b: float
    b_interval: tuple[float, float] | None


@dataclass(frozen=True)
class Diff:
    a: str
    b: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    retrained: list[tuple[str, str, str]] = field(default_factory=list)  # cell, version a, b
    moved: list[Moved] = field(default_factory=list)
    settings_only_a: list[str] = field(default_factory=list)
    settings_only_b: list[str] = field(default_factory=list)
    unchanged_numbers: int = 0
    tiers: list[tuple[str, Any, Any]] = field(default_factory=list)  # loss, tier a, tier b
    order: tuple[list[str], list[str]] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.retrained or self.moved
                    or self.settings_only_a or self.settings_only_b or self.tiers or self.order)


def side(path: Path) -> Side:
    """A release folder, or a workspace (a folder with ``reports/cells.csv``)."""
    if (path / "MANIFEST.json").is_file():
        release: Release = read_release(path)
        reports, label, cells = path / REPORTS, f"release {release.name}", release.cells
    elif (path / REPORTS / "cells.csv").is_file():
        reports, label = path / REPORTS, f"workspace {path.resolve()}"
        cells = results_document(pd.read_csv(reports / "cells.csv"), "workspace")["cells"]
    else:
        raise ReleaseError(f"{path}: neither a release (no MANIFEST.json) nor a workspace with "
                           f"{REPORTS}/cells.csv")
    return Side(label, cells, read_table(reports, "leaderboard.csv"),
                read_table(reports, "ranks.csv"))


def interval_of(row: pd.Series, metric: str) -> tuple[float, float] | None:
    """``metric``'s interval over seeds in a leaderboard row, or None (one seed, or none)."""
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return float(lo), float(hi)


def _outside(value: float, interval: tuple[float, float] | None) -> bool:
    return interval is not None and not interval[0] <= value <= interval[1]


def _setting_key(board: pd.DataFrame) -> list[str]:
    return [a for a in GRID_AXES if a in board.columns and a != "seed"]


def _moved(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[Moved], list[str], list[str], int]:
    """Headline numbers that moved beyond their interval, settings on one side only, and how
    many numbers did not move."""
    if a.empty or b.empty:
        return [], [], [], 0
    key = [k for k in _setting_key(a) if k in b.columns]
    metrics = [c.removesuffix("_mean") for c in a.columns
               if c.endswith("_mean") and c in b.columns and _is_headline(c.removesuffix("_mean"))]

    def label(values: Any) -> str:
        values = values if isinstance(values, tuple) else (values,)
        return ", ".join(f"{k}={v}" for k, v in zip(key, values, strict=True))

    ia, ib = a.set_index(key), b.set_index(key)
    only_a = sorted(label(s) for s in ia.index.difference(ib.index))
    only_b = sorted(label(s) for s in ib.index.difference(ia.index))
    moved, same = [], 0
    for setting in ia.index.intersection(ib.index):
        ra, rb, name = ia.loc[setting], ib.loc[setting], label(setting)
        for m in metrics:
            va, vb = float(ra[f"{m}_mean"]), float(rb[f"{m}_mean"])
            if not (math.isfinite(va) and math.isfinite(vb)):
                continue
            ca, cb = interval_of(ra, m), interval_of(rb, m)
            if ca is None or cb is None:  # one seed: no interval, so any change counts
                changed = not math.isclose(va, vb, rel_tol=1e-9, abs_tol=1e-12)
            else:
                changed = _outside(va, cb) or _outside(vb, ca)
            if changed:
                moved.append(Moved(name, m, va, ca, vb, cb))
            else:
                same += 1
    return moved, only_a, only_b, same


def _is_headline(name: str) -> bool:
    """A base metric of the registry (not a control, layer or representation column)."""
    return name in METRICS


def _ranking(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[tuple[str, Any, Any]],
                                                         tuple[list[str], list[str]] | None]:
    if a.empty or b.empty or "loss" not in a or "loss" not in b:
        return [], None
    ta, tb = a.set_index("loss"), b.set_index("loss")
    both = ta.index.intersection(tb.index)
    tiers = [(loss, ta.at[loss, "tier"], tb.at[loss, "tier"]) for loss in both
             if "tier" in ta and "tier" in tb and ta.at[loss, "tier"] != tb.at[loss, "tier"]]
    order_a = list(ta.loc[both].sort_values("mean_rank").index)
    order_b = list(tb.loc[both].sort_values("mean_rank").index)
    return tiers, (order_a, order_b) if order_a != order_b else None


def diff(a: Side, b: Side) -> Diff:
    """What changed from ``a`` to ``b``."""
    va = {c["identity"]["cell_id"]: c["identity"]["version"] for c in a.cells}
    vb = {c["identity"]["cell_id"]: c["identity"]["version"] for c in b.cells}
    moved, only_a, only_b, same = _moved(a.leaderboard, b.leaderboard)
    tiers, order = _ranking(a.ranks, b.ranks)
    return Diff(a.label, b.label, added=sorted(set(vb) - set(va)),
                removed=sorted(set(va) - set(vb)),
                retrained=sorted((c, va[c], vb[c]) for c in set(va) & set(vb) if va[c] != vb[c]),
                moved=moved, settings_only_a=only_a, settings_only_b=only_b,
                unchanged_numbers=same, tiers=tiers, order=order)


def _fmt(metric: str, value: float, interval: tuple[float, float] | None) -> str:
    m = lookup(metric)
    text = m.text(value)
    if interval is None:
        return f"{text} (1 seed)"
    return f"{text} [{m.text(interval[0])}, {m.text(interval[1])}]"


def to_markdown(d: Diff, limit: int = 50) -> str:
    """The diff as Markdown: a summary line, then one section per kind of change."""
    lines = [f"## `cbench diff`: {d.a} → {d.b}", ""]
    if not d.changed:
        lines.append(f"No change: the same cells and versions, no headline number outside its "
                     f"interval ({d.unchanged_numbers} compared), the same tiers and order.")
        return "\n".join(lines) + "\n"
    lines.append(f"Cells: {len(d.added)} added, {len(d.removed)} removed, {len(d.retrained)} "
                 f"retrained by other code. Headline numbers: {len(d.moved)} moved beyond their "
                 f"interval over seeds, {d.unchanged_numbers} did not.")

    def section(title: str, rows: list[str]) -> None:
        if rows:
            lines.extend(["", f"### {title}", ""])
            lines.extend(rows[:limit])
            if len(rows) > limit:
                lines.append(f"- … and {len(rows) - limit} more")

    section("Added cells", [f"- `{c}`" for c in d.added])
    section("Removed cells", [f"- `{c}`" for c in d.removed])
    section("Retrained by other code (a new version)",
            [f"- `{c}`: `{a}` → `{b}`" for c, a, b in d.retrained])
    if d.moved:
        rows = ["| setting | metric | before | after |", "| --- | --- | --- | --- |"]
        rows += [f"| {m.setting} | {lookup(m.metric).label} | {_fmt(m.metric, m.a, m.a_interval)}"
                 f" | {_fmt(m.metric, m.b, m.b_interval)} |" for m in d.moved]
        section("Numbers that moved beyond their interval (mean [interval over seeds])", rows)
    section("Settings only before", [f"- {s}" for s in d.settings_only_a])
    section("Settings only after", [f"- {s}" for s in d.settings_only_b])
    section("Tiers that changed", [f"- {loss}: tier {a} → {b}" for loss, a, b in d.tiers])
    if d.order:
        section("Order of mean ranks", [f"- before: {' > '.join(d.order[0])}",
                                        f"- after: {' > '.join(d.order[1])}"])
    return "\n".join(lines) + "\n"
