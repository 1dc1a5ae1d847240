"""Every symbol the notes use reaches the PDF (issue 48, item 7): the LaTeX writers of the
leaderboard (leaderboard.tex) and of the suite board (suite.tex) compiled with pdflatex, their
text read back with pdftotext, and χ², α, τ, Δ (and the other symbols) found with no "?" in
their place. The papers' tables have no LaTeX output (paper_tables.md only). Unit rules of
:mod:`pipeline.report.render.tex_escape` below the compiled tests."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.config import load
from pipeline.report.grid import ranks
from pipeline.report.grid.board import make_board
from pipeline.report.grid.compare import compare_to_baseline
from pipeline.report.render.latex import PACKAGES, to_latex
from pipeline.report.render.tex_escape import MATH, RAISED, TEXT, escape
from pipeline.report.suite.board import TaskInput, suite_board
from pipeline.report.suite.render import to_latex as suite_to_latex
from tests.report.synthetic import ROOT, synthetic_cells

PDFLATEX, PDFTOTEXT = shutil.which("pdflatex"), shutil.which("pdftotext")
needs_tex = pytest.mark.skipif(
    PDFLATEX is None or PDFTOTEXT is None,
    reason="pdflatex or pdftotext not on PATH (Debian: apt-get install texlive-latex-base "
           "texlive-latex-recommended poppler-utils)")

# every symbol the notes use, and how pdftotext writes it back (whitespace removed): the Type 1
# Computer Modern fonts map \chi^{2} to "χ2", \Delta to U+2206 (INCREMENT), \ldots to ". . ."
SYMBOLS = "χ² α τ Δ ± − ≤ ≥ → × · √ … ↑ ↓ ≈ ∈ ∞ c₁ Demšar"
READ_BACK = {"χ²": ("χ2",), "α": ("α",), "τ": ("τ",), "Δ": ("Δ", "∆"), "±": ("±",),
             "−": ("−",), "≤": ("≤",), "≥": ("≥",), "→": ("→",), "×": ("×",), "·": ("·",),
             "√": ("√",), "…": ("...",), "↑": ("↑",), "↓": ("↓",), "≈": ("≈",), "∈": ("∈",),
             "∞": ("∞",), "c₁": ("c1",), "Demšar": ("Demšar",)}


def pdf_text(tex_name: str, tex: str, folder: Path) -> str:
    """``tex`` compiled inside a plain article (booktabs, graphicx), read back by pdftotext
    (NFC-composed)."""
    (folder / tex_name).write_text(tex, encoding="utf-8")
    preamble = "".join(rf"\usepackage{{{p}}}" + "\n" for p in PACKAGES)
    (folder / "doc.tex").write_text("\\documentclass{article}\n" + preamble
                                    + f"\\begin{{document}}\n\\input{{{tex_name}}}\n"
                                    "\\end{document}\n", encoding="utf-8")
    proc = subprocess.run([str(PDFLATEX), "-interaction=nonstopmode", "-halt-on-error",
                           "doc.tex"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = subprocess.run([str(PDFTOTEXT), "-enc", "UTF-8", "doc.pdf", "-"], cwd=folder,
                         capture_output=True, text=True, timeout=60, check=True)
    return unicodedata.normalize("NFC", out.stdout)  # s + combining caron back to š


def squeeze(text: str) -> str:
    """Whitespace removed: pdftotext may set a superscript or a tall glyph apart."""
    return re.sub(r"\s+", "", text)


def leaderboard():
    """The default grid's leaderboard as the report stage builds it: the comparison with the
    baseline (†, Δ) and the notes of the ranking across settings (Friedman χ², α)."""
    params = load(ROOT / "params.yaml")
    cells = synthetic_cells(params)
    pair_on = [a for a in params.report.group_by if a != "loss"]
    cmp = compare_to_baseline(cells, params.report.baseline, "loss", pair_on, ["recall_at_1"],
                              params.report.level)
    across = ranks.cross_compare(cells, params.report)
    return make_board(cells, params.report, params.data.name, comparison=cmp,
                      tiers=(across.axis, ranks.tier_of(across), ranks.notes(across)))


def suite():
    """A suite of four tasks and three losses: the notes carry the Friedman χ² and α."""
    rng = np.random.default_rng(8)
    tasks = []
    for t in range(4):
        rows = [{"objective": "contrastive", "loss": loss, "k": 16, "tau": 0.1,
                 "arch": "linear", "seed": s, "status": "ok", "cell_id": f"{loss}-{t}-{s}",
                 "train_seconds": 2.0, "peak_rss_bytes": 1e8,
                 "recall_at_1": mu + rng.normal(0, 0.03)}
                for loss, mu in (("a", 0.3), ("b", 0.5), ("c", 0.4)) for s in range(3)]
        tasks.append(TaskInput(f"t{t}", "vectors", False, pd.DataFrame(rows)))
    return suite_board(tasks, "recall_at_1", ["loss", "k", "tau", "arch"], n_boot=50)


def assert_symbols_read_back(text: str, notes: tuple[str, ...]) -> None:
    flat = squeeze(text)
    for symbol, forms in READ_BACK.items():
        assert any(f in flat for f in forms), f"{symbol!r} not in the PDF text ({forms})"
    assert not any("?" in n for n in notes)  # so any "?" in the PDF is a lost symbol
    assert "?" not in text, text[max(0, text.find("?") - 80):text.find("?") + 80]


@pytest.mark.slow
@needs_tex
def test_the_leaderboard_notes_keep_their_greek_in_the_pdf(tmp_path):
    board = leaderboard()
    joined = " ".join(board.notes)
    assert "χ²" in joined and "α = " in joined and "Δ" in joined and "τ = " in joined
    board = dataclasses.replace(board, notes=(*board.notes, f"Symbols: {SYMBOLS}."))
    text = pdf_text("leaderboard.tex", to_latex(board), tmp_path)
    flat = squeeze(text)
    assert "Friedmanχ2=" in flat and "at α = 0.05" in " ".join(text.split())
    assert_symbols_read_back(text, board.notes)


@pytest.mark.slow
@needs_tex
def test_the_suite_notes_keep_their_greek_in_the_pdf(tmp_path):
    board = suite()
    joined = " ".join(board.notes)
    assert "χ²" in joined and "α = " in joined
    board = dataclasses.replace(board, notes=(*board.notes, f"Symbols: {SYMBOLS}."))
    text = pdf_text("suite.tex", suite_to_latex(board), tmp_path)
    assert "Friedmanχ2=" in squeeze(text)
    assert_symbols_read_back(text, board.notes)


@pytest.mark.parametrize(("text", "tex"), [
    ("Friedman χ² = 3.5", r"Friedman $\chi^{2}$ = 3.5"),  # one math group, not $\chi$$^2$
    ("at α = 0.05", r"at $\alpha$ = 0.05"),
    ("τ ↦ Δ", r"$\tau$ $\mapsto$ $\Delta$"),
    ("Φ⁻¹(x)", r"$\Phi^{-1}$(x)"),
    ("c₁/k²", r"c$_{1}$/k$^{2}$"),
    ("±−×·√…", r"$\pm-\times\cdot\surd$\ldots{}"),
    ("ℓο", r"$\ell o$"),  # a space where a control word meets a letter
    ("†²", r"$^{\dagger2}$"),
    ("Demšar é", r"Dem\v{s}ar \'{e}"),
    ("x̂", r"\^{x}"),  # a combining accent on a plain letter
    ("ﬁ ½", "fi 1/2"),
])
def test_escape_rules(text, tex):
    assert escape(text) == tex


def test_a_character_without_a_rule_is_refused_not_dropped():
    with pytest.raises(ValueError, match=r"'中' \(U\+4E2D CJK UNIFIED IDEOGRAPH-4E2D\) in 'a 中': "
                                         r"no LaTeX form; add one to "
                                         r"pipeline\.report\.render\.tex_escape"):
        escape("a 中")
    with pytest.raises(ValueError, match=r"U\+2603 SNOWMAN"):
        escape("☃")


def test_every_symbol_in_the_report_and_stats_code_has_a_latex_form():
    """Any non-ASCII character a sentence of pipeline/report or pipeline/stats could carry (all
    their source, docstrings included; html.py's page controls and lone combining accents
    aside) escapes without an error."""
    pipeline = ROOT / "pipeline"
    files = [*(pipeline / "report").rglob("*.py"), *(pipeline / "stats").glob("*.py"),
             pipeline / "metrics.py"]
    chars = {c for f in files if f.name != "html.py" for c in f.read_text(encoding="utf-8")
             if not c.isascii() and not unicodedata.combining(c)}
    assert {"χ", "α", "τ", "Δ", "²"} <= chars
    refused = []
    for c in sorted(chars):
        try:
            escape(c)
        except ValueError:
            refused.append(f"{c} U+{ord(c):04X}")
    assert not refused, refused


@pytest.mark.slow
@needs_tex
def test_every_mapped_symbol_compiles_and_reads_back_without_a_question_mark(tmp_path):
    symbols = [c for c in (*TEXT, *MATH, *RAISED) if not c.isascii() and not c.isspace()]
    text = pdf_text("symbols.tex", escape(" ".join(symbols)) + "\n", tmp_path)
    assert "?" not in text and len(squeeze(text)) >= len(symbols)
