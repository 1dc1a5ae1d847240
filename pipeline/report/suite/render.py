"""The suite leaderboard (:class:`pipeline.report.suite.board.SuiteBoard`) as text: its tables as
(title, header, rows of text), then Markdown, LaTeX (booktabs) and one self-contained HTML page.
Computes nothing: every value comes from the board, formatted by :mod:`pipeline.report.formatting`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.report.formatting import fmt_bounds, fmt_value, is_missing, pct, text_columns
from pipeline.report.render.markdown import table as md_table
from pipeline.report.render.page import escape as html_escape
from pipeline.report.render.page import figure, html_page
from pipeline.report.render.tex_escape import escape
from pipeline.report.suite.board import SuiteBoard

Table = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]
MISSING = "missing"  # a loss without a score on a task


def tex(text: str) -> str:
    """Plain text to LaTeX, every symbol kept (:func:`pipeline.report.render.tex_escape.escape`)."""
    return escape(text)


def _num(value: Any, digits: str = "") -> str:
    if is_missing(value):
        return "–"
    return format(float(value), digits) if digits else fmt_value(value)


def _unit(board: SuiteBoard) -> str:
    return " (%)" if board.primary.unit == "%" else ""


def _seeds(board: SuiteBoard, what: str) -> str:
    """A header's interval unit: '[95% t-interval over seeds]' or the single-seed caveat."""
    if int(board.per_task["seeds"].max()) > 1:
        return f" [{pct(board.level)} {what} over seeds]"
    return " (1 seed: no interval)"


def _bounds(lo: Any, hi: Any) -> str:
    return f"[{_num(lo, '.2f')}, {_num(hi, '.2f')}]" if not (is_missing(lo) or is_missing(hi)) \
        else "–"


def aggregate_rows(board: SuiteBoard) -> Table:
    """The aggregate table: one row per loss, best mean rank first."""
    m, n = board.primary, len(board.tasks)
    ranked = board.ranking.blocks_complete if board.ranking is not None else 0
    kinds = [t for t in board.types if len(board.types) > 1]
    header = ("Loss", "Tier", "Tasks", f"Mean {m.label}{_unit(board)} (all {n} tasks)",
              *(f"Mean, {t} tasks" for t in kinds), f"Mean rank ({ranked} tasks)",
              f"Rank interval [{pct(board.level)}]", "P(rank 1)",
              "Borda (rank)", "Win rate (tasks)",
              f"IQM {m.label}{_unit(board)}{_seeds(board, 'stratified bootstrap')}",
              f"Optimality gap [{pct(board.level)}]", "Train time (s)", "Cells")
    rows = []
    for r in board.aggregate.to_dict("records"):
        borda = f"{_num(r['borda'])} ({_num(r['borda_rank'])})"
        rows.append((str(r["loss"]), _num(r["tier"]), f"{r['tasks']} of {r['tasks_total']}",
                     fmt_bounds(r["mean"], metric=m),
                     *(fmt_bounds(r[f"mean_{t}"], metric=m) for t in kinds),
                     _num(r["mean_rank"], ".2f"), _bounds(r["rank_lo"], r["rank_hi"]),
                     _num(r["p_rank1"], ".2f"), borda,
                     f"{_num(r['win_rate'], '.2f')} ({r['win_rate_tasks']})",
                     fmt_bounds(r["iqm"], r["iqm_lo"], r["iqm_hi"], m),
                     _num(r["optimality_gap"], ".2f") + (
                         "" if is_missing(r["optimality_gap_lo"]) else
                         " " + _bounds(r["optimality_gap_lo"], r["optimality_gap_hi"])),
                     _num(r["train_seconds_total"], ".4g"), str(r["cells"])))
    title = (f"Across {n} tasks: {m.label} ({m.better} is better); tiers and ranks over the "
             f"{ranked} tasks every loss entered")
    return title, header, tuple(rows)


def task_rows(board: SuiteBoard, task: str) -> Table:
    """One task's table: the losses by rank (missing ones last, marked)."""
    m = board.primary
    info = next(t for t in board.tasks if t.name == task)
    part = board.per_task[board.per_task["task"] == task].sort_values(
        ["missing", "rank", "loss"], kind="stable")
    header = ("#", "Loss", f"{m.label}{_unit(board)}{_seeds(board, 't-interval')}", "Seeds",
              "Setting (chosen)", "Train time (s)", "Cells")
    rows = []
    for r in part.to_dict("records"):
        if r["missing"]:
            rows.append(("–", str(r["loss"]), MISSING, "0", "–", "–", "0"))
            continue
        rows.append((_num(r["rank"]), str(r["loss"]), fmt_bounds(r["mean"], r["lo"], r["hi"], m),
                     str(r["seeds"]), str(r["setting"]), _num(r["train_seconds_total"], ".4g"),
                     str(r["cells"])))
    how = (f"chosen and reported on {info.report} (no selection half)" if info.chosen_on_reported
           else f"chosen on {info.select}, reported on {info.report}")
    fixed = f"; every cell: {info.fixed}" if info.fixed else ""
    return f"Task {task} ({info.type}): {how}{fixed}", header, tuple(rows)


def tables(board: SuiteBoard) -> list[Table]:
    """Every table of the board, in reading order: each task, then the aggregate."""
    return [*(task_rows(board, t.name) for t in board.tasks), aggregate_rows(board)]


def caption(board: SuiteBoard) -> str:
    """The setting in one line."""
    kinds = ", ".join(f"{sum(t.type == k for t in board.tasks)} {k}" for k in board.types)
    return (f"{len(board.tasks)} tasks ({kinds}), {len(board.losses)} losses "
            f"({', '.join(board.losses)}); primary metric {board.primary.label} "
            f"({board.primary.name}, {board.primary.better} is better); settings chosen over "
            f"{', '.join(board.group_by) or 'nothing'}.")


def _align(rows: Sequence[Sequence[str]], width: int) -> list[str]:
    words = text_columns(rows) if rows else [True] * width
    return ["l" if k < len(words) and words[k] else "r" for k in range(width)]


def to_markdown(board: SuiteBoard, figures: Mapping[str, str]) -> str:
    """The page: title, setting, one table per task, the aggregate, the figures (``figures``:
    caption → relative path; a missing figure's reason is in the notes), the notes."""
    parts = [f"# Suite {board.name}: {board.primary.label} across {len(board.tasks)} tasks", "",
             caption(board), ""]
    for title, header, rows in tables(board):
        parts += [f"## {title}", "", md_table(header, rows, _align(rows, len(header)))]
    parts += ["## Figures", ""]
    parts += [f"![{c}]({p})\n\n*{c}*\n" for c, p in figures.items()] or ["No figures.", ""]
    parts += ["## Notes", "", *(f"- {n}" for n in board.notes),
              "- Pairs (P(A > B), Nemenyi, Wilcoxon–Holm): suite_pairs.csv; every entry: "
              "suite_tasks.csv; every aggregate: suite_aggregate.csv."]
    return "\n".join(parts) + "\n"


def _tabular(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    spec = "".join(_align(rows, len(header)))
    return [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
            " & ".join(tex(h) for h in header) + r" \\", r"\midrule",
            *(" & ".join(tex(c) for c in r) + r" \\" for r in rows),
            r"\bottomrule", r"\end{tabular}"]


def _float(title: str, body: list[str], label: str) -> list[str]:
    return [r"\begin{table}[t]", r"\centering", rf"\caption{{{tex(title)}}}",
            rf"\label{{{label}}}", r"\small", r"\setlength{\tabcolsep}{4pt}",
            r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
            *body[:-1], body[-1] + "}", r"\end{table}"]


def to_latex(board: SuiteBoard) -> str:
    """Two ``table`` floats (the aggregate; every task's entries, one block per task) with
    booktabs rules and the notes; needs ``booktabs`` and ``graphicx``."""
    title, header, rows = aggregate_rows(board)
    parts = [r"% needs \usepackage{booktabs}, \usepackage{graphicx} in the preamble.",
             *_float(f"Suite {board.name}. {title}.", _tabular(header, rows), "tab:suite"),
             r"\begin{table}[t]", r"\centering",
             rf"\caption{{{tex(f'Suite {board.name}: every task. ' + caption(board))}}}",
             r"\label{tab:suite-tasks}", r"\small", r"\setlength{\tabcolsep}{4pt}",
             r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%"]
    task_tables = [task_rows(board, t.name) for t in board.tasks]
    width = len(task_tables[0][1])
    body = [rf"\begin{{tabular}}{{{''.join(_align(task_tables[0][2], width))}}}", r"\toprule",
            " & ".join(tex(h) for h in task_tables[0][1]) + r" \\"]
    for t_title, _, t_rows in task_tables:
        body += [r"\midrule", rf"\multicolumn{{{width}}}{{l}}{{\emph{{{tex(t_title)}}}}} \\",
                 *(" & ".join(tex(c) for c in r) + r" \\" for r in t_rows)]
    body += [r"\bottomrule", r"\end{tabular}}"]
    parts += [*body, r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize\raggedright",
              r"\par ".join(tex(n) for n in board.notes), r"\end{minipage}", r"\end{table}"]
    return "\n".join(parts) + "\n"


# the suite page's own rules, after the shell's (pipeline.report.render.page.CSS)
_CSS = """
th, td { white-space: nowrap; }
td.missing { color: #cf222e; font-style: italic; }
"""


def _html_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    words = _align(rows, len(header))
    head = "".join(f'<th scope="col">{html_escape(h)}</th>' for h in header)

    def cell(k: int, c: str) -> str:
        cls = "missing" if c == MISSING else ("" if words[k] == "l" else "num")
        return f'<td class="{cls}">{html_escape(c)}</td>' if cls else f"<td>{html_escape(c)}</td>"

    body = "".join("<tr>" + "".join(cell(k, c) for k, c in enumerate(r)) + "</tr>" for r in rows)
    return (f"<h2>{html_escape(title)}</h2>\n<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def to_html(board: SuiteBoard, figures: Sequence[tuple[str, bytes]]) -> str:
    """One self-contained page (inline CSS, no script, figures as data: URIs): the setting, a
    table per task, the aggregate, the figures (caption, PNG bytes), the notes."""
    sections = "\n".join(_html_table(*t) for t in tables(board))
    images = "".join(figure(c, png) for c, png in figures)
    notes = "".join(f"<li>{html_escape(n)}</li>" for n in board.notes)
    title = f"Suite {board.name}: {board.primary.label} across {len(board.tasks)} tasks"
    body = f"""<h1>{html_escape(title)}</h1>
<p>{html_escape(caption(board))}</p>
{sections}
<h2>Figures</h2>
{images or "<p>No figures.</p>"}
<h2>Notes</h2>
<ul class="notes">{notes}</ul>"""
    return html_page(title, body, _CSS)
