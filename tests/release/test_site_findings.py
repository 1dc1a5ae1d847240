"""The site's front page opens with the findings: a Markdown document (``cbench site
--findings``) rendered with its tables and its local images embedded, then every paper claim
the releases hold (their ``reports/summary.json``), then the list of releases."""

from __future__ import annotations

import base64
import html
import json
import re

import pytest

from pipeline.cli import main
from pipeline.release.bundle import ReleaseError, write_release
from pipeline.release.site import build_site, claims_table, release_folders
from tests.release.workspace import write_workspace

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGA"
                       "hKmMIQAAAABJRU5ErkJggg==")
CLAIMS = [{"setting": "mnist contrastive vs supervised (head)",
           "claim": "contrastive more Gaussian than supervised", "verdict": "held",
           "seeds": 3, "tested": True, "reason": "", "trained_enough": False},
          {"setting": "Laplace, linear encoder", "claim": "CV falls as d grows",
           "verdict": "unresolved", "seeds": 1, "tested": False,
           "reason": "too few seeds (1 < 3)"}]
FINDINGS = """# Findings

| claim | verdict |
| --- | --- |
| CV falls as d grows | unresolved |

![CV against d](figs/cv.png)

A remote figure stays remote: ![x](https://example.invalid/x.png)
"""


@pytest.fixture
def releases(tmp_path):
    ws = write_workspace(tmp_path / "ws")
    (ws / "reports" / "summary.json").write_text(json.dumps({"paper_claims": CLAIMS}))
    write_release("study-v1", ws, tmp_path / "releases", "c1")
    return tmp_path / "releases"


@pytest.fixture
def findings(tmp_path):
    (tmp_path / "docs" / "figs").mkdir(parents=True)
    (tmp_path / "docs" / "figs" / "cv.png").write_bytes(PNG)
    path = tmp_path / "docs" / "FINDINGS.md"
    path.write_text(FINDINGS, encoding="utf-8")
    return path


def test_the_front_page_shows_the_findings_then_the_claims_then_the_releases(
        releases, findings, tmp_path):
    index = build_site(release_folders([releases]), tmp_path / "site", findings)
    page = index.read_text(encoding="utf-8")
    at = {name: page.index(text) for name, text in (
        ("findings", "<h1>Findings</h1>"), ("their table", "<td>CV falls as d grows</td>"),
        ("claims", "Paper claims in these releases"), ("releases", "<h2>Releases</h2>"),
        ("release row", 'href="study-v1/index.html"'))}
    assert list(at) == sorted(at, key=at.get)  # in this order on the page
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in page
    assert 'src="https://example.invalid/x.png"' in page
    rows = re.findall(r"<tr><td>study-v1</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>"
                      r'<td class="num">(\d+)</td><td>([^<]*)</td><td>([^<]*)</td></tr>', page)
    assert [tuple(html.unescape(v) for v in row) for row in rows] == [
        (c["setting"], c["claim"], c["verdict"], str(c["seeds"]), c["reason"], trained)
        for c, trained in zip(CLAIMS, ("no", ""), strict=True)]


def test_without_findings_the_front_page_is_the_list(releases, tmp_path):
    page = build_site(release_folders([releases]), tmp_path / "site").read_text()
    assert "<section" not in page and "Paper claims in these releases" in page
    assert claims_table([]).empty and list(claims_table([])) == [
        "release", "setting", "claim", "verdict", "seeds", "reason", "trained enough"]


def test_a_missing_findings_file_is_refused_before_anything_is_written(releases, tmp_path):
    with pytest.raises(ReleaseError, match=r"--findings .*nowhere\.md: no such file"):
        build_site(release_folders([releases]), tmp_path / "site", tmp_path / "nowhere.md")
    assert not (tmp_path / "site").exists()


def test_the_command_line_takes_the_findings(releases, findings, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["site", "releases", "--findings", str(findings), "-o", "site"]) == 0
    assert "<h1>Findings</h1>" in (tmp_path / "site" / "index.html").read_text()
    assert main(["site", "releases", "--findings", "missing.md", "-o", "site2"]) == 2
    assert "missing.md: no such file" in capsys.readouterr().err
