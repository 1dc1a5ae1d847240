"""leaderboard.tex compiles with pdflatex in a plain article with no overfull box, for the
default grid and every profile in profiles/ (cells shaped like theirs, plausible values)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.config import load, rules
from pipeline.report.grid.board import make_board
from pipeline.report.grid.compare import compare_to_baseline
from pipeline.report.render.latex import PACKAGES, to_latex
from tests.report.synthetic import ROOT, synthetic_cells

PDFLATEX = shutil.which("pdflatex")
PROFILES = [None, *sorted(p.name for p in (ROOT / "profiles").glob("*.yaml"))]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not on PATH (Debian: apt-get install "
                                                "texlive-latex-base texlive-latex-recommended)"),
]


def compile_tex(tex: str, folder: Path) -> str:
    """Compile ``tex`` inside a plain article; returns the log (asserts the PDF exists)."""
    (folder / "leaderboard.tex").write_text(tex, encoding="utf-8")
    preamble = "".join(rf"\usepackage{{{p}}}" + "\n" for p in PACKAGES)
    (folder / "doc.tex").write_text("\\documentclass{article}\n" + preamble
                                    + "\\begin{document}\n\\input{leaderboard.tex}\n"
                                    "\\end{document}\n", encoding="utf-8")
    proc = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                          cwd=folder, capture_output=True, text=True, timeout=120)
    log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert proc.returncode == 0, log[-3000:]
    assert (folder / "doc.pdf").stat().st_size > 1000
    return log


@pytest.mark.parametrize("profile", PROFILES)
def test_compiles_without_overfull_boxes(profile, tmp_path, monkeypatch):
    # the GPU profiles ask for more CPUs per cell than this machine has: load them as on the
    # machine they are written for (tests/test_config.py tests the refusal on a small one)
    monkeypatch.setattr(rules, "local_cores", lambda: 64)
    params = load(ROOT / "params.yaml", ROOT / "profiles" / profile if profile else None)
    cells = synthetic_cells(params)
    cmp = None
    if params.report.baseline in set(cells.loss) and cells.loss.nunique() > 1:
        pair_on = [a for a in params.report.group_by if a != "loss"]
        cmp = compare_to_baseline(cells, params.report.baseline, "loss", pair_on,
                                  ["recall_at_1"], params.report.level)
    board = make_board(cells, params.report, params.data.name, comparison=cmp)
    log = compile_tex(to_latex(board), tmp_path)
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log
    assert "! " not in log  # no LaTeX error
