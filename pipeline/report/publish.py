"""Write one leaderboard table in every published format: Markdown, LaTeX, CSV and HTML."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pipeline.report.html import to_html
from pipeline.report.latex import to_latex
from pipeline.report.render import notes_for, to_csv, to_markdown, write_text


def write_tables(table: pd.DataFrame, stem: Path, title: str, label: str,
                 notes: Sequence[str] | None = None) -> list[Path]:
    """``<stem>.md``, ``.tex`` (LaTeX label ``label``), ``.csv`` and ``.html``; returns the paths.

    notes: footnotes shared by all formats (default ``render.notes_for(table)``).
    """
    stem = Path(stem)
    notes = notes_for(table) if notes is None else list(notes)
    return [write_text(stem.with_suffix(".md"), to_markdown(table, notes=notes)),
            write_text(stem.with_suffix(".tex"), to_latex(table, title, label, notes=notes)),
            write_text(stem.with_suffix(".csv"), to_csv(table)),
            write_text(stem.with_suffix(".html"), to_html(table, title, notes))]
