"""The one formatter: how every value, interval, mark and axis reads in every writer.

Metric values are shown as the registry says (``Metric.format``, × 100 for ``%``); an interval
as ``mean ± half-width``, the half-width to two significant digits and the mean to the same
decimal place. Negative numbers get a true minus sign (U+2212). Marks: ``†`` differs from the
baseline (paired test), ``°`` training did not change the statistic, ``‡`` a row with failed or
stale cells. Writers style best and tied values themselves (bold, underline, italic).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.metrics import METRICS, Metric

MISSING = "–"
SIG = "†"
UNCHANGED = "°"
ROW_MARK = "‡"
MINUS = "−"
# how an axis reads in headers and captions; an axis not named here reads as its own name
AXIS_SYMBOLS = {"tau": "τ", "embed_dim": "d", "batch_size": "B"}
AXIS_PHRASES = {"arch": "{} encoder", "tau_schedule": "{} τ schedule"}


def pct(level: float) -> str:
    """A confidence level as a percentage: 0.95 → '95%', 0.995 → '99.5%'."""
    return f"{100 * level:.10g}%"


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' NA."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _minus(text: str) -> str:
    return MINUS + text[1:] if text.startswith("-") else text


def fmt_value(value: Any) -> str:
    """One plain value (an axis value, a count): integers as integers, floats with 4
    significant digits, missing or empty as '–'."""
    if hasattr(value, "item"):
        value = value.item()
    if is_missing(value) or value == "":
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return _minus(str(int(value)))
    if isinstance(value, float):
        return _minus(f"{value:.4g}")
    return _minus(str(value)) if isinstance(value, int) else str(value)


def fmt_stat(stat: str, value: Any) -> str:
    """A Table 1 statistic as the registry shows it, with the unit '%' written out as the paper
    does; "–" when missing."""
    if value is None or not np.isfinite(value):
        return MISSING
    metric = METRICS[stat]
    return metric.text(value) + ("%" if metric.unit == "%" else "")


def text_columns(rows: Sequence[Sequence[str]]) -> list[bool]:
    """Per column of a table of text cells, whether it holds words rather than numbers (to align
    it left): the first column always; another when none of its cells starts like a number
    ('–' and "not measured" count as neither)."""
    width = max((len(r) for r in rows), default=0)
    numeric = [any(c[:1].isdigit() or (c[:1] in "-+" + MINUS and c[1:2].isdigit())
                   for c in (r[k] for r in rows if k < len(r))) for k in range(width)]
    return [k == 0 or not numeric[k] for k in range(width)]


def fmt_bounds(est: Any, lo: Any = math.nan, hi: Any = math.nan,
               metric: Metric | None = None) -> str:
    """``est [lo, hi]`` for an interval that need not be symmetric (a bootstrap's): scaled and
    formatted as ``metric`` says (without one, 4 significant digits); just the estimate when a
    bound is missing."""
    if is_missing(est):
        return MISSING

    def one(v: Any) -> str:
        return _minus(metric.text(float(v))) if metric is not None else fmt_value(float(v))

    text = one(est)
    if not (is_missing(lo) or is_missing(hi)) and np.isfinite(lo) and np.isfinite(hi):
        text += f" [{one(lo)}, {one(hi)}]"
    return text


def fmt_interval(mean: Any, lo: Any = math.nan, hi: Any = math.nan,
                 metric: Metric | None = None) -> str:
    """``mean ± half-width`` (``metric`` scales and formats; without one, 4 significant digits
    for a lone mean), or ``mean [low, high]`` when the interval is not symmetric about the mean
    (a bounded metric's, :func:`pipeline.stats.intervals.bounded_seed_ci`): a ± would reach past
    the bound; just the mean when the bounds are missing; '–' without a mean."""
    if is_missing(mean):
        return MISSING
    scale = metric.scale if metric is not None else (lambda v: v)
    m = scale(float(mean))
    if is_missing(lo) or is_missing(hi):
        return _minus(format(m, metric.format)) if metric is not None else _minus(f"{m:.4g}")
    low, high = scale(float(lo)), scale(float(hi))
    half = (high - low) / 2
    if half <= 0:
        return _minus(format(m, metric.format if metric is not None else ".4g")) + " ± 0"
    d = 1 - math.floor(math.log10(half))  # two significant digits of the half-width
    if d < 0:  # round to tens, hundreds, …
        m, half, low, high, d = round(m, d), round(half, d), round(low, d), round(high, d), 0
    d = min(d, 8)
    if abs((m - low) - (high - m)) > 0.1 * half:  # asymmetric (a bounded metric's): its bounds
        return f"{_minus(f'{m:.{d}f}')} [{_minus(f'{low:.{d}f}')}, {_minus(f'{high:.{d}f}')}]"
    return f"{_minus(f'{m:.{d}f}')} ± {half:.{d}f}"


def fmt_delta(metric: Metric, delta: Any, like: str = "") -> str:
    """A change (trained − untrained) with its sign, as ``metric`` is shown; to the decimal
    place of ``like`` (the value it sits beside) when that is a plain decimal."""
    if is_missing(delta):
        return ""
    value = metric.scale(float(delta))
    plain = like.replace(MINUS, "")
    if plain.replace(".", "", 1).isdigit():
        decimals = len(plain.partition(".")[2])
        text = f"{value:+.{decimals}f}"
    else:
        text = format(value, "+" + metric.format)
    if float(text) == 0:  # no "−0": a change that rounds to nothing has no sign
        return text[1:]
    return _minus(text)


@dataclass(frozen=True)
class Entry:
    """One metric of one row, as every writer shows it."""

    value: str  # the mean (or the lone value) as shown
    half: str  # the interval's half-width as shown; '' without one
    best: bool  # the best value of its column
    tied: bool  # not significantly different from the best
    sig: bool  # differs from the baseline at the same setting (paired test): †
    delta: str  # change against the untrained encoder as shown; '' when there is none
    unchanged: bool  # the interval over seeds of trained − untrained covers 0: °
    sort: float  # the mean, for sorting (NaN when missing)

    @property
    def text(self) -> str:
        """``value ± half`` and ``†``: the entry without the control line."""
        body = f"{self.value} ± {self.half}" if self.half else self.value
        return body + (SIG if self.sig else "")

    @property
    def control(self) -> str:
        """``Δ +0.01`` and ``°``: the change against the untrained encoder, '' without one."""
        if not self.delta:
            return ""
        return f"Δ {self.delta}{UNCHANGED if self.unchanged else ''}"


def entry(row: pd.Series, metric: Metric) -> Entry:
    """The entry of ``metric`` in one row of a board's table (``<m>_mean/_lo/_hi`` and the
    optional ``<m>_best/_tied/_sig``, ``delta_<m>_mean``, ``changed_<m>_n/_of`` columns)."""
    m = metric.name
    mean = row.get(f"{m}_mean")
    text = fmt_interval(mean, row.get(f"{m}_lo"), row.get(f"{m}_hi"), metric)
    value, _, half = text.partition(" ± ")

    def flag(col: str) -> bool:
        v = row.get(col)
        return bool(v) if not is_missing(v) else False

    # °: decided on seeds (the t-interval over seeds of trained − untrained covers 0); with one
    # seed there is no such interval and no ° (unresolved), whatever the cells' own intervals say
    lo, hi = row.get(f"delta_{m}_lo"), row.get(f"delta_{m}_hi")
    by_seeds = not (is_missing(lo) or is_missing(hi))
    unchanged = bool(by_seeds and float(lo) <= 0.0 <= float(hi))
    return Entry(value=value, half=half, best=flag(f"{m}_best"), tied=flag(f"{m}_tied"),
                 sig=flag(f"{m}_sig"), delta=fmt_delta(metric, row.get(f"delta_{m}_mean"), value),
                 unchanged=unchanged,
                 sort=math.nan if is_missing(mean) else float(mean))


def axis_header(axis: str) -> str:
    """The column header of a grid axis: its symbol (τ, d, B) or its name."""
    return AXIS_SYMBOLS.get(axis, axis)


def axis_text(axis: str, value: Any) -> str:
    """One axis value in words for a caption: 'linear encoder', 'd = 16', 'infonce'."""
    if axis in AXIS_PHRASES:
        return AXIS_PHRASES[axis].format(fmt_value(value))
    if isinstance(value, str):
        return value
    return f"{axis_header(axis)} = {fmt_value(value)}"


def setting_text(setting: Mapping[str, Any]) -> str:
    """A setting (axis -> value) in words: 'k = 16, τ = 0.1, linear encoder'; 'the one
    setting' when no axis is left to tell it."""
    return ", ".join(axis_text(a, v) for a, v in setting.items()) or "the one setting"


def seeds_text(counts: pd.Series) -> str:
    """'1 seed', '5 seeds' or '3–5 seeds' from the ok cells per row."""
    lo, hi = int(counts.min()) if len(counts) else 0, int(counts.max()) if len(counts) else 0
    n = f"{lo}" if lo == hi else f"{lo}–{hi}"
    return f"{n} seed" + ("" if hi == 1 else "s")
