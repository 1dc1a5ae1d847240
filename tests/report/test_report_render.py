"""Markdown, LaTeX and HTML renderings of an aggregate table: formats, balance, parseability."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from pipeline.report.compare import compare_to_baseline, mark_significant
from pipeline.report.html import to_html
from pipeline.report.latex import escape, to_latex
from pipeline.report.publish import write_tables
from pipeline.report.render import failure_notes, fmt_interval, to_csv, to_markdown
from pipeline.report.tables import aggregate

GROUPS = ["loss", "k", "tau", "arch"]


@pytest.fixture
def table(board) -> pd.DataFrame:
    shifted = board.copy()
    dcl16 = (shifted.loss == "dcl") & (shifted.k == 16)
    shifted.loc[dcl16, "recall_at_1"] += [0.10, 0.11, 0.12]
    cmp = compare_to_baseline(shifted, "infonce", pair_on=GROUPS[1:], metrics=["recall_at_1"])
    return mark_significant(aggregate(shifted, GROUPS, ["recall_at_1", "risk_keval", "cv"]), cmp)


@pytest.mark.parametrize(("args", "text"), [
    ((7 / 3, 7 / 3 - 3.7945830, 7 / 3 + 3.7945830), "2.3 ± 3.8"),
    ((0.21, 0.21 - 0.0248418, 0.21 + 0.0248418), "0.210 ± 0.025"),
    ((0.5, 0.4, 0.6), "0.50 ± 0.10"),
    ((0.4321, float("nan"), float("nan")), "0.4321"),
    ((float("nan"), float("nan"), float("nan")), "–"),
    ((1.0, 1.0, 1.0), "1 ± 0"),
])
def test_interval_format(args, text):
    assert fmt_interval(*args) == text


def test_markdown(table):
    md = to_markdown(table)
    lines = md.splitlines()
    header = lines[0]
    assert header.startswith("| loss | k | tau | arch | n_seeds | failed | recall_at_1 |")
    body = [line for line in lines[2:] if line.startswith("|")]
    assert len(body) == len(table)
    assert all(line.count("|") == header.count("|") for line in body)
    assert "| infonce | 4 | 0.1 | linear | 3 | 0 | 2.3 ± 3.8 | 2 |" in md
    assert re.search(r"\| dcl \| 16 \|[^\n]*± [0-9.]+† \|", md)  # the significant cell
    assert "| weince | 4 | 0.1 | linear | 0 | 1 | – | – |" in md
    assert "†: paired t-test" in md and "95% Student-t interval" in md


def test_markdown_columns_and_unknown(table):
    md = to_markdown(table, columns=["loss", "recall_at_1", "git_sha"], notes=[])
    assert md.splitlines()[0] == "| loss | recall_at_1 | git_sha |"
    with pytest.raises(ValueError, match="columns: unknown column 'recal'; allowed: recall_at_1"):
        to_markdown(table, columns=["recal"])


def test_latex_balanced_booktabs(table):
    tex = to_latex(table, "Leaderboard: recall_at_1 & 95% CI", "tab:leaderboard")
    assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 1
    assert tex.count(r"\begin{table}") == tex.count(r"\end{table}") == 1
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert tex.count(rule) == 1
    body = tex[tex.index(r"\begin{tabular}"):tex.index(r"\end{tabular}")]
    spec = re.match(r"\\begin\{tabular\}\{([lcr]+)\}", body).group(1)
    rows = [line for line in body.splitlines() if line.endswith(r"\\")]
    assert len(rows) == len(table) + 1  # header + one per row
    for line in rows:
        assert len(re.findall(r"(?<!\\)&", line)) == len(spec) - 1
    assert r"recall\_at\_1" in tex and "recall_at_1" not in tex.replace(r"\_", "")
    assert r"\caption{Leaderboard: recall\_at\_1 \& 95\% CI}" in tex
    assert r"$\pm$" in tex and r"$^{\dagger}$" in tex
    assert tex.count("{") == tex.count("}")


def test_latex_escape_and_label():
    assert escape("a_b & 50% #1 $x$ {y} ~^\\") == (
        r"a\_b \& 50\% \#1 \$x\$ \{y\} \textasciitilde{}\textasciicircum{}\textbackslash{}")
    with pytest.raises(ValueError, match="label = 'my label'"):
        to_latex(pd.DataFrame({"x_mean": [1.0], "x_lo": [0.0], "x_hi": [2.0]}), "c", "my label")


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.rows, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in ("meta", "input", "br"):
            self.stack.append(tag)
        if tag == "tr":
            self.rows.append([])

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> in {self.stack}"
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] in ("td", "button") and self.rows:
            self.rows[-1].append(data)


def test_html_parses_and_is_self_contained(table):
    page = to_html(table, "Leaderboard <test>", ["note with <b>markup</b> & ampersand"])
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert parser.stack == []  # every element closed
    body_rows = parser.rows[1:]
    assert len(body_rows) == len(table)
    first_cells = [r[0] for r in body_rows]
    assert first_cells == list(table.loss)
    assert "http" not in page.lower() and "//" not in re.sub(r"<script>.*</script>", "", page,
                                                            flags=re.S)
    assert not any(t in ("link", "img", "iframe") for t, _ in parser.tags)
    assert not any("src" in a or "href" in a for _, a in parser.tags)
    assert "Leaderboard &lt;test&gt;" in page and "&lt;b&gt;markup&lt;/b&gt; &amp;" in page
    heads = [a for t, a in parser.tags if t == "th"]
    assert [h["data-key"] for h in heads][:7] == [*GROUPS, "n_seeds", "failed", "recall_at_1"]
    types = {h["data-key"]: h["data-type"] for h in heads}
    assert types["recall_at_1"] == "num" and types["loss"] == "text" and types["k"] == "num"


def test_html_sort_keys_are_means(table):
    page = to_html(table, "t")
    assert f'data-v="{float(table.recall_at_1_mean.iloc[0])!r}"' in page


def test_failure_notes(board):
    assert failure_notes(board) == ["failed wei04s0: train: NaN loss"]
    assert failure_notes(board.drop(columns="status")) == []


def test_csv_roundtrip(table):
    back = pd.read_csv(__import__("io").StringIO(to_csv(table)))
    assert list(back.columns) == list(table.columns) and len(back) == len(table)


def test_write_tables(table, tmp_path):
    paths = write_tables(table, tmp_path / "out" / "leaderboard", "Leaderboard", "tab:lb")
    assert [p.suffix for p in paths] == [".md", ".tex", ".csv", ".html"]
    assert all(p.stat().st_size > 0 for p in paths)
