"""The formatter and the writers: Markdown, LaTeX and HTML of one board; the registry drives
every writer (a metric added to it appears in md, tex, html and csv)."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from pipeline.metrics import METRICS, Metric, lookup
from pipeline.report.formatting import fmt_delta, fmt_interval, fmt_value, pct
from pipeline.report.grid.board import csv_table, make_board
from pipeline.report.grid.compare import compare_to_baseline
from pipeline.report.render.html import to_html
from pipeline.report.render.latex import PACKAGES, escape, to_latex
from pipeline.report.render.markdown import cells_table, table, to_markdown


@pytest.fixture
def board_obj(board, report_cfg):
    shifted = board.copy()
    dcl16 = (shifted.loss == "dcl") & (shifted.k == 16)
    shifted.loc[dcl16, "recall_at_1"] += [0.10, 0.11, 0.12]
    cmp = compare_to_baseline(shifted, "infonce", pair_on=["k", "tau", "arch"],
                              metrics=["recall_at_1"])
    return make_board(shifted, report_cfg(columns=["recall_at_1", "risk_keval", "cv"]),
                      "laplace", comparison=cmp)


@pytest.mark.parametrize(("args", "text"), [
    ((7 / 3, 7 / 3 - 3.7945830, 7 / 3 + 3.7945830), "2.3 ± 3.8"),
    ((0.21, 0.21 - 0.0248418, 0.21 + 0.0248418), "0.210 ± 0.025"),
    ((0.5, 0.4, 0.6), "0.50 ± 0.10"),
    ((-0.5, -0.6, -0.4), "−0.50 ± 0.10"),
    ((1234.0, 1100.0, 1368.0), "1230 ± 130"),
    ((0.4321, float("nan"), float("nan")), "0.4321"),
    ((float("nan"), float("nan"), float("nan")), "–"),
    ((1.0, 1.0, 1.0), "1 ± 0"),
])
def test_interval_format(args, text):
    assert fmt_interval(*args) == text


def test_metric_formats_and_deltas():
    r1, cv = lookup("recall_at_1"), lookup("cv")
    assert fmt_interval(0.4412, metric=r1) == "44.1"
    assert fmt_interval(0.44, 0.43, 0.45, r1) == "44.0 ± 1.0"
    # a bounded metric's interval on the logit scale is not symmetric: its bounds, not a ±
    # that would reach past 100%
    assert fmt_interval(0.998, 0.99, 0.9995, r1) == "99.80 [99.00, 99.95]"
    assert fmt_interval(-3.1357, metric=lookup("risk_keval")) == "−3.136"
    assert fmt_delta(cv, -0.02127, "0.211") == "−0.021" and fmt_delta(cv, -1e-5, "0.211") == "0.000"
    assert fmt_delta(lookup("ad_pass_frac"), 0.0625, "94") == "+6"
    assert fmt_value(3.0) == "3" and fmt_value(-0.25) == "−0.25" and fmt_value("") == "–"
    assert pct(0.95) == "95%" and pct(0.995) == "99.5%" and pct(0.9) == "90%"


def test_markdown_table_writer():
    text = table(["a", "bb"], [["x", "1"], ["y|z", "10"]], ["l", "r"])
    assert text.splitlines() == ["| a    |  bb |", "|:-----|----:|", "| x    |   1 |",
                                 "| y\\|z |  10 |"]


def _rows(md: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in md.splitlines() if line.startswith("|") and not line.startswith("|:")
            and not line.startswith("|-")]


def test_markdown_board(board_obj):
    md = to_markdown(board_obj)
    rows = _rows(md)
    assert rows[0] == ["#", "loss", "k", "R@1 (%) ↑", "Risk (nats) ↓", "CV"]
    assert len(rows) == 1 + len(board_obj.table)
    assert all(len(r) == len(rows[0]) for r in rows)
    assert rows[1][:3] == ["1", "dcl", "4"] and rows[1][3] == "**240 ± 380**"
    dcl16 = next(r for r in rows if r[1:3] == ["dcl", "16"])
    assert "†" in dcl16[3]  # differs from infonce at k = 16
    assert next(r for r in rows if r[1] == "weince") == ["–‡", "weince", "4", "–", "–", "–"]
    assert "laplace data" in md and "Provenance: git abc1234" in md and "3 seeds" in md


def test_cells_table(board):
    md = cells_table(board, ["loss", "k", "seed", "recall_at_1", "cv", "nope"])
    rows = _rows(md)
    assert rows[0] == ["loss", "k", "seed", "R@1 (%) ↑", "CV"]
    assert len(rows) == 1 + len(board)
    assert "Failed cells:" in md and "`wei04s0`: train: NaN loss" in md


def test_latex_balanced_booktabs(board_obj):
    tex = to_latex(board_obj, "tab:leaderboard")
    assert tex.startswith("% contrastive-bench leaderboard: needs \\usepackage{booktabs}, "
                          "\\usepackage{graphicx}")
    assert PACKAGES == ("booktabs", "graphicx")
    body = tex[tex.index(r"\begin{tabular}{"):tex.rindex(r"\end{tabular}")]
    spec = re.match(r"\\begin\{tabular\}\{([lcr]+)\}", body).group(1)
    assert spec == "rlrrrr"
    for rule in (r"\toprule", r"\bottomrule"):
        assert tex.count(rule) == 1
    rows = [line for line in body.splitlines() if line.endswith(r"\\") and "&" in line]
    assert len(rows) == 2 + len(board_obj.table)  # two header lines, one per row
    for line in rows:
        outer = re.sub(r"\\begin\{tabular\}.*?\\end\{tabular\}", "X", line)
        assert len(re.findall(r"(?<!\\)&", outer)) == len(spec) - 1
    assert r"\textbf{240}" in tex and r"$\pm$380" in tex and r"$^{\dagger}$" in tex
    assert r"\label{tab:leaderboard}" in tex and tex.count("{") == tex.count("}")
    assert not re.search(r"[^\x00-\x7f]", tex.split("\n", 2)[2])  # pdflatex-safe body


def test_latex_escape_and_label(board_obj):
    assert escape("a_b & 50% #1 $x$ {y} ~^\\") == (
        r"a\_b \& 50\% \#1 \$x\$ \{y\} \textasciitilde{}\textasciicircum{}\textbackslash{}")
    assert escape("τ ≥ 0.5 ↑ Δ −1° é") == (
        r"$\tau$ $\geq$ 0.5 $\uparrow$ $\Delta$ $-$1$^{\circ}$ \'{e}")
    with pytest.raises(ValueError, match="label = 'my label'"):
        to_latex(board_obj, "my label")


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.rows, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in ("meta", "input", "br", "img"):
            self.stack.append(tag)
        if tag == "tr":
            self.rows.append([])

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> in {self.stack}"
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] in ("td", "span") and self.rows:
            self.rows[-1].append(data)


def test_html_parses_and_is_self_contained(board_obj):
    png = b"\x89PNG\r\n\x1a\nfake"
    page = to_html(board_obj, [("a <figure>", png)])
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert parser.stack == []  # every element closed
    mains = [a for t, a in parser.tags if t == "tr" and a.get("class") == "main"]
    assert len(mains) == len(board_obj.table)
    assert "http" not in page.lower()
    srcs = [a["src"] for t, a in parser.tags if "src" in a]
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not any(t in ("link", "iframe") or "href" in a for t, a in parser.tags)
    assert "a &lt;figure&gt;" in page
    heads = {a["data-key"]: a for t, a in parser.tags if t == "th" and "data-key" in a}
    assert list(heads)[:3] == ["rank", "loss", "k"]
    assert heads["recall_at_1"]["title"] == lookup("recall_at_1").tooltip  # from the registry
    assert heads["recall_at_1"]["aria-sort"] == "descending"  # sorted by the primary
    assert heads["recall_at_1"]["data-type"] == "num" and heads["loss"]["data-type"] == "text"
    best = [a for t, a in parser.tags if t == "td" and "best" in a.get("class", "")]
    assert len(best) == 2  # R@1 and risk: the dcl k=4 row
    assert page.count('class="detail" hidden') == len(board_obj.table)
    assert "laplace data" in page and "abc1234" in page


def test_registry_drives_every_writer(board, report_cfg, monkeypatch):
    """A metric added to the registry (and named in report.columns) shows in md, tex, html and
    csv with its label, unit, direction and tooltip; nothing else has to name it."""
    monkeypatch.setitem(METRICS, "toy_score", Metric(
        "toy_score", "Toy", "A toy score for this test", "higher", ".2f", "%", "this test",
        source="report"))
    cells = board.assign(toy_score=[0.1 * (i % 4) for i in range(len(board))])
    b = make_board(cells, report_cfg(columns=["recall_at_1", "toy_score"]))
    assert [m.name for m in b.columns] == ["recall_at_1", "toy_score"]
    md, tex, page = to_markdown(b), to_latex(b), to_html(b)
    assert "Toy (%) ↑" in md and r"Toy & " in tex.replace(r"R@1 & Toy", "Toy & ")
    assert r"(\%) $\uparrow$" in tex
    assert 'title="A toy score for this test. Higher is better. Source: this test."' in page
    assert ">Toy (%) ↑<" in page
    csv = pd.read_csv(io.StringIO(csv_table(b).to_csv(index=False)))
    assert {"toy_score_mean", "toy_score_lo", "toy_score_hi", "toy_score_rank",
            "toy_score_best"} <= set(csv.columns)
    assert csv.toy_score_best.sum() >= 1
    top = b.table.toy_score_mean.max()
    assert b.table.loc[b.table.toy_score_best, "toy_score_mean"].eq(top).all()
