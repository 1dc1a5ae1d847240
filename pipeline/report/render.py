"""Cell formatting shared by the renderers, the Markdown and CSV leaderboards, and the writers.

An ``aggregate`` table (optionally passed through ``compare.mark_significant``) is shown as:
group columns, ``n_seeds``, ``failed``, then per metric ``m`` (``mean ± half-width`` of the
interval, followed by the significance marker when ``<m>_sig``) and ``<m>_rank``, then the
provenance. Half-widths carry two significant digits and the mean is given to the same decimal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.report.tables import PROVENANCE

MISSING = "–"
MARKER = "†"
_DERIVED = ("_mean", "_lo", "_hi", "_rank", "_sig", "_p")
_META = ("n_seeds", "failed", *PROVENANCE)


def metrics_of(table: pd.DataFrame) -> list[str]:
    """Metric names: ``attrs['metrics']`` when set, else every ``m`` with an ``m_mean`` column."""
    if table.attrs.get("metrics"):
        return [m for m in table.attrs["metrics"] if f"{m}_mean" in table]
    return [c[: -len("_mean")] for c in table.columns if c.endswith("_mean")]


def group_columns(table: pd.DataFrame) -> list[str]:
    """Group columns: ``attrs['group_by']`` when set, else the columns not derived from a metric."""
    if table.attrs.get("group_by") is not None:
        return [c for c in table.attrs["group_by"] if c in table]
    metrics = metrics_of(table)
    derived = {f"{m}{s}" for m in metrics for s in _DERIVED}
    return [c for c in table.columns if c not in derived and c not in _META]


def display_columns(table: pd.DataFrame) -> list[str]:
    """The default column order of the rendered leaderboards (see the module docstring)."""
    cols = [*group_columns(table), *[c for c in ("n_seeds", "failed") if c in table]]
    for m in metrics_of(table):
        cols += [m, *([f"{m}_rank"] if f"{m}_rank" in table else [])]
    return cols + [c for c in PROVENANCE if c in table]


def resolve_columns(table: pd.DataFrame, columns: Sequence[str] | None) -> list[str]:
    """``columns`` checked against what can be shown (None: ``display_columns``)."""
    if columns is None:
        return display_columns(table)
    metrics = metrics_of(table)
    allowed = [*metrics, *[c for c in table.columns if c not in metrics]]
    for col in columns:
        if col not in allowed:
            raise ValueError(f"columns: unknown column {col!r}; allowed: {', '.join(allowed)}")
    return list(columns)


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' NA."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def fmt_value(value: Any) -> str:
    """One plain value: integers as integers, floats with 4 significant digits, missing or empty
    as '–'."""
    if is_missing(value) or value == "":
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def fmt_interval(mean: float, lo: float, hi: float, pm: str = " ± ") -> str:
    """``mean ± half-width``; the half-width to two significant digits, the mean to the same
    decimal place; just the mean (4 significant digits) when the bounds are NaN."""
    if is_missing(mean):
        return MISSING
    mean = float(mean)
    if is_missing(lo) or is_missing(hi):
        return f"{mean:.4g}"
    half = (float(hi) - float(lo)) / 2
    if half <= 0:
        return f"{mean:.4g}{pm}0"
    decimals = min(8, max(0, 1 - math.floor(math.log10(half))))
    return f"{mean:.{decimals}f}{pm}{half:.{decimals}f}"


def cell(table: pd.DataFrame, i: int, col: str, pm: str = " ± ", marker: str = MARKER) -> str:
    """The text of row ``i`` (positional), column ``col``; metric names format as intervals."""
    row = table.iloc[i]
    if f"{col}_mean" in table and col not in table:
        text = fmt_interval(row[f"{col}_mean"], row.get(f"{col}_lo"), row.get(f"{col}_hi"), pm)
        sig = row.get(f"{col}_sig")
        return text + marker if (not is_missing(sig) and bool(sig)) else text
    return fmt_value(row[col].item() if hasattr(row[col], "item") else row[col])


def sort_key(table: pd.DataFrame, i: int, col: str) -> str:
    """A machine-readable value for sorting (the mean for metrics); '' when missing."""
    value = table.iloc[i][f"{col}_mean" if f"{col}_mean" in table and col not in table else col]
    if is_missing(value):
        return ""
    if pd.api.types.is_number(value) and not pd.api.types.is_bool(value):
        return repr(float(value))
    return str(value)


def notes_for(table: pd.DataFrame, baseline: str | None = None, marker: str = MARKER) -> list[str]:
    """Standard footnotes: the interval, the rank convention, the significance marker."""
    level = table.attrs.get("level", 0.95)
    notes = [f"Values: mean ± half-width of the {level:.0%} Student-t interval over seeds "
             "(mean only with one seed).",
             "Rank: 1 = best among rows; ties share the smallest rank; distribution statistics "
             "are not ranked."]
    if any(c.endswith("_sig") for c in table.columns):
        against = f" against {baseline}" if baseline else ""
        notes.append(f"{marker}: paired t-test over seeds{against} at the same setting, p < 0.05 "
                     "(no multiple-comparison correction).")
    return notes


def failure_notes(board: pd.DataFrame) -> list[str]:
    """One note per failed cell of the per-cell board: ``cell_id: first line of the reason``."""
    if "status" not in board:
        return []
    notes = []
    for _, r in board[board["status"] != "ok"].iterrows():
        reason = r.get("reason")
        text = "failed" if is_missing(reason) or not str(reason).strip() else str(reason)
        notes.append(f"failed {r.get('cell_id', '?')}: {text.splitlines()[0]}")
    return notes


def to_markdown(table: pd.DataFrame, columns: Sequence[str] | None = None,
                notes: Sequence[str] | None = None) -> str:
    """GitHub-flavoured Markdown table, one line per row, then the notes as a list."""
    cols = resolve_columns(table, columns)
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(c) for c in cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    for i in range(len(table)):
        lines.append("| " + " | ".join(esc(cell(table, i, c)) for c in cols) + " |")
    notes = notes_for(table) if notes is None else notes
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(f"- {n}" for n in notes) + "\n"
                                      if notes else "")


def to_csv(table: pd.DataFrame) -> str:
    """Every column of the table (numbers unformatted), comma-separated, no index."""
    return table.to_csv(index=False)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path

