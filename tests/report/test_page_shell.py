"""One HTML page shell (pipeline.report.render.page): the leaderboard, the suite board and every
page of the release site are framed by it and open with its CSS, and no other module of
pipeline/ writes a page frame or a data: URI of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from pipeline.release.bundle import write_release
from pipeline.release.site import build_site, release_folders
from pipeline.report.grid.board import make_board
from pipeline.report.render import page
from pipeline.report.render.html import to_html
from pipeline.report.suite.board import TaskInput, suite_board
from pipeline.report.suite.render import to_html as suite_to_html
from tests.release.workspace import cells_frame, write_workspace

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"  # the bytes are not read as an image here, only embedded
STYLE = re.compile(r"<style>(.*?)</style>", re.S)


def _suite_page() -> str:
    rows = [{"objective": "contrastive", "loss": loss, "k": 16, "tau": 0.1, "arch": "linear",
             "seed": s, "status": "ok", "cell_id": f"{loss}{s}", "train_seconds": 1.0,
             "recall_at_1": mu + 0.01 * s}
            for loss, mu in (("a", 0.3), ("b", 0.5)) for s in range(3)]
    task = TaskInput("t", "vectors", False, pd.DataFrame(rows))
    board = suite_board([task], "recall_at_1", ["loss", "k", "tau", "arch"], n_boot=20)
    return suite_to_html(board, [("a figure", PNG)])


def _site_pages(tmp_path: Path, report_cfg) -> list[Path]:
    cells = cells_frame()
    ws = write_workspace(tmp_path / "ws", cells)
    board = make_board(cells, report_cfg(columns=["recall_at_1"]))
    (ws / "reports" / "leaderboard.html").write_text(to_html(board), encoding="utf-8")
    write_release("v1", ws, tmp_path / "releases", "c1")
    write_release("v2", ws, tmp_path / "releases", "c2")
    index = build_site(release_folders([tmp_path / "releases"]), tmp_path / "site")
    return sorted(index.parent.rglob("*.html"))


def test_every_page_is_framed_by_the_shell_and_opens_with_its_css(board, report_cfg,
                                                                   tmp_path):
    leaderboard = to_html(make_board(board, report_cfg(columns=["recall_at_1"])),
                          [("a figure", PNG)])
    site = _site_pages(tmp_path, report_cfg)
    kinds = {p.name.split("-")[0] for p in site}
    assert {"index.html", "task", "aggregate.html", "loss", "diff"} <= kinds, kinds
    pages = {"leaderboard": leaderboard, "suite": _suite_page(),
             **{str(p.relative_to(tmp_path)): p.read_text(encoding="utf-8") for p in site}}
    for name, text in pages.items():
        assert text.startswith("<!doctype html>\n"), name
        styles = STYLE.findall(text)
        assert styles and styles[0].startswith(page.CSS), name
        assert text.count("<body>") == 1 and text.rstrip().endswith("</html>"), name
    for name in ("leaderboard", "suite"):
        assert f'src="{page.data_uri(PNG)}"' in pages[name], name


def test_only_the_shell_writes_a_page_frame_or_a_data_uri():
    found = {}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        text = path.read_text(encoding="utf-8").lower()
        hits = [w for w in ("<!doctype", "<html", "<head>", ";base64,") if w in text]
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    assert found == {"pipeline/report/render/page.py": ["<!doctype", "<html", "<head>",
                                                        ";base64,"]}, found


def test_escape_and_data_uri():
    assert page.escape('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert page.escape(None) == "None"
    assert page.data_uri(b"\x00\xff", "image/svg+xml") == "data:image/svg+xml;base64,AP8="
    html = page.html_page("a < b", "<p>x</p>", css="p { color: red; }", head="<meta name=x>")
    assert "<title>a &lt; b</title>" in html and "<meta name=x>\n</head>" in html
    assert STYLE.findall(html) == [page.CSS + "p { color: red; }"]
