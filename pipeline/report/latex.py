"""LaTeX leaderboard: a ``table`` float holding a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``).

Text is escaped (``& % $ # _ { } ~ ^ \\``), ``±`` becomes ``$\\pm$``, the significance marker
``$^{\\dagger}$``; numeric columns are right-aligned, text columns left-aligned.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pipeline.report.render import MISSING, cell, metrics_of, notes_for, resolve_columns

_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
            "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
            "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}
_SYMBOLS = {"±": r"$\pm$", "†": r"$^{\dagger}$", MISSING: "--", "τ": r"$\tau$"}


def escape(text: str) -> str:
    """Plain text to LaTeX: special characters escaped, ±/†/–/τ to their math forms."""
    out = "".join(_ESCAPES.get(ch, ch) for ch in str(text))
    for sym, tex in _SYMBOLS.items():
        out = out.replace(sym, tex)
    return out


def _align(table: pd.DataFrame, col: str, metrics: list[str]) -> str:
    if col in metrics or (col in table and pd.api.types.is_numeric_dtype(table[col])):
        return "r"
    return "l"


def tabular(table: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """The ``tabular`` environment alone: header, ``\\midrule``, one line per row."""
    cols = resolve_columns(table, columns)
    metrics = metrics_of(table)
    spec = "".join(_align(table, c, metrics) for c in cols)
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(escape(c) for c in cols) + r" \\", r"\midrule"]
    for i in range(len(table)):
        lines.append(" & ".join(escape(cell(table, i, c)) for c in cols) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def to_latex(table: pd.DataFrame, caption: str, label: str,
             columns: Sequence[str] | None = None, notes: Sequence[str] | None = None) -> str:
    """A complete ``table`` float: caption, label, the booktabs tabular and the notes.

    label: a LaTeX key (no spaces or special characters). Wide tables: pass ``columns``.
    """
    if not label or any(ch in label for ch in "{}\\%#&~^$ "):
        raise ValueError(f"label = {label!r}: must be non-empty, without spaces or any of "
                         "{ } \\ % # & ~ ^ $")
    notes = notes_for(table) if notes is None else notes
    parts = [r"\begin{table}[t]", r"\centering", rf"\caption{{{escape(caption)}}}",
             rf"\label{{{label}}}", r"\small", tabular(table, columns)]
    if notes:
        parts += [r"\par\smallskip", r"\footnotesize " + " ".join(escape(n) for n in notes)]
    parts.append(r"\end{table}")
    return "\n".join(parts) + "\n"
