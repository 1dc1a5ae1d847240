"""LaTeX leaderboard a paper can ``\\input``: a ``table`` float holding a booktabs ``tabular``.

Needs ``\\usepackage{booktabs}`` and ``\\usepackage{graphicx}`` (named in a comment at the top of
the file); compiles with pdflatex in a plain ``article``. The tabular is scaled down to
``\\linewidth`` only when it is wider, so no box is overfull; an entry's interval and its change
against the untrained encoder sit on a second, smaller line, which keeps the columns narrow.
Best values are bold, values not significantly different from the best underlined.
"""

from __future__ import annotations

from pipeline.metrics import Metric
from pipeline.report.formatting import Entry, axis_header, fmt_value
from pipeline.report.grid.board import Board
from pipeline.report.render.tex_escape import escape

__all__ = ["PACKAGES", "escape", "tabular", "to_latex"]

PACKAGES = ("booktabs", "graphicx")


def _axis(axis: str) -> str:
    head = axis_header(axis)
    return f"${escape(head)}$" if len(head) == 1 and head.isascii() else escape(head)


def _head(metric: Metric) -> tuple[str, str]:
    unit = f"({metric.unit})" if metric.unit else ""
    return escape(metric.label), escape(" ".join(p for p in (unit, metric.arrow) if p))


def _cell(e: Entry) -> str:
    value = escape(e.value) + (r"$^{\dagger}$" if e.sig else "")
    if e.best:
        value = rf"\textbf{{{value}}}"
    elif e.tied:
        value = rf"\underline{{{value}}}"
    second = " ".join(p for p in (f"±{e.half}" if e.half else "", e.control) if p)
    if not second:
        return value
    return (rf"\begin{{tabular}}[t]{{@{{}}r@{{}}}}{value}\\"
            rf"{{\scriptsize {escape(second)}}}\end{{tabular}}")


def tabular(board: Board) -> str:
    """The ``tabular`` alone: a two-line header, then each section under its title."""
    cols = len(board.axes) + len(board.columns) + 1
    spec = "r" + "".join("l" if board.is_text(a) else "r" for a in board.axes) + "r" * len(
        board.columns)
    heads = [_head(m) for m in board.columns]
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join([r"\#", *(_axis(a) for a in board.axes), *(h[0] for h in heads)]) + r" \\"]
    if any(h[1] for h in heads):
        lines.append(" & ".join(["", *("" for _ in board.axes), *(h[1] for h in heads)]) + r" \\")
    for section in board.sections:
        lines.append(r"\midrule")
        if len(board.sections) > 1:
            lines.append(rf"\multicolumn{{{cols}}}{{l}}{{\emph{{{escape(section.title)}}}}} \\")
        for i in section.rows:
            row = board.table.iloc[i]
            cells = [escape(board.rank_text(i)), *(escape(fmt_value(row[a])) for a in board.axes),
                     *(_cell(board.entry(i, m)) for m in board.columns)]
            lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def to_latex(board: Board, label: str = "tab:leaderboard") -> str:
    """A complete ``table`` float (caption, label, the scaled tabular), then its notes and
    provenance as small text after it: a float cannot break across pages, and the notes of a
    comparison (tiers, rank intervals, what would settle each pair) can run longer than one.

    label: a LaTeX key (no spaces or special characters).
    """
    if not label or any(ch in label for ch in "{}\\%#&~^$ "):
        raise ValueError(f"label = {label!r}: must be non-empty, without spaces or any of "
                         "{ } \\ % # & ~ ^ $")
    notes = [*board.notes, f"Provenance: {board.provenance_text}."]
    packages = ", ".join(rf"\usepackage{{{p}}}" for p in PACKAGES)
    parts = [f"% {board.title}: needs {packages} in the preamble.",
             r"% \input{leaderboard.tex} where a table float and its notes may go.",
             r"\begin{table}[t]", r"\centering",
             rf"\caption{{{escape(board.title)}: {escape(board.caption)}}}",
             rf"\label{{{label}}}", r"\small", r"\setlength{\tabcolsep}{4pt}",
             r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
             tabular(board) + "}", r"\end{table}",
             r"\begin{flushleft}\footnotesize",
             r"\par ".join(escape(n) for n in notes), r"\end{flushleft}"]
    return "\n".join(parts) + "\n"
