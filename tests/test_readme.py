"""README.md is a front door a newcomer reads in ten minutes; the rest lives in docs/*.md.

Checked here: its length, the findings on its first screen, that every relative link of the README
and of docs/*.md reaches a file (no anchors: sections move, files are the stable unit), that the
README links every docs page, and that what the README tells a newcomer to type or open exists:
the Makefile targets, the `cbench` subcommands and options (parsed by the real parser), the
repository files it names."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipeline.cli.app import COMMANDS, parser
from pipeline.cli.common import UsageError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
MAX_LINES = 350

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a link inside one is an example, not a link)."""
    return FENCE.sub("", text)


def _code_lines(text: str) -> list[str]:
    return [line for block in FENCE.findall(text) for line in block.splitlines()[1:-1]]


def relative_links(path: Path) -> list[str]:
    """The link and image targets of a Markdown file that point into the repository."""
    return [t for t in LINK.findall(_prose(path.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` that has an anchor or reaches no file, with the reason."""
    problems = []
    for target in relative_links(path):
        if "#" in target:
            problems.append(f"{target}: an anchor (link the file; sections move)")
        elif not (path.parent / target).exists():
            problems.append(f"{target}: no such file beside {path.name}")
    return problems


def test_the_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, (f"README.md has {lines} lines, at most {MAX_LINES}: "
                                "move reference material to a docs/ page and link it")


def test_the_findings_are_on_the_first_screen():
    first_screen = "\n".join(README.read_text(encoding="utf-8").splitlines()[:25])
    assert "## Findings" in first_screen
    assert "](docs/FINDINGS.md)" in first_screen


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file(path):
    assert relative_links(path) or path != README
    assert broken_links(path) == []


def test_the_link_check_sees_a_broken_link_an_anchor_and_ignores_code(tmp_path):
    (tmp_path / "a.png").write_bytes(b"")
    page = tmp_path / "page.md"
    page.write_text("![a](a.png) [b](b.md) [c](a.png#top) [d](https://x.org/y)\n"
                    "```\n[e](e.md)\n```\n", encoding="utf-8")
    assert [p.split(":")[0] for p in broken_links(page)] == ["b.md", "a.png#top"]


def test_the_readme_links_every_docs_page():
    linked = {(ROOT / t).resolve() for t in relative_links(README)}
    assert [p.name for p in PAGES if p.resolve() not in linked] == []


def test_the_make_targets_it_shows_exist():
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    text = README.read_text(encoding="utf-8")
    shown = set(re.findall(r"`make ([a-z][a-z-]*)", text))
    shown |= {line.split()[1] for line in _code_lines(text) if line.startswith("make ")}
    assert {"run", "test"} <= shown
    assert sorted(shown - targets) == []


def test_the_cbench_commands_it_shows_parse():
    text = README.read_text(encoding="utf-8")
    commands = [line.split("#")[0].strip() for line in _code_lines(text)
                if re.match(r"(\.venv/bin/)?cbench ", line)]
    assert commands
    for command in commands:
        argv = shlex.split(command)[1:]
        try:
            parser().parse_args(argv)
        except (SystemExit, UsageError) as refused:
            pytest.fail(f"README shows `{command}`, which cbench refuses ({refused})")
    named = set(re.findall(r"`(?:\.venv/bin/)?cbench ([a-z]+)", text))
    assert sorted(named - set(COMMANDS)) == []


REPO_PATH = re.compile(r"`((?:pipeline|stages|profiles|suites|cluster|bench|tests|docs)/[\w./-]*"
                       r"|[\w.-]+\.(?:yaml|toml|md|py))`")
WRITTEN = {"REPRODUCE.md"}  # named as what a release holds, not as a file of the checkout


def test_the_files_it_names_exist():
    text = README.read_text(encoding="utf-8")
    named = set(REPO_PATH.findall(_prose(text)))
    named |= {m for line in _code_lines(text)
              for m in re.findall(r"\b((?:profiles|suites|bench|cluster)/[\w./-]*\w)", line)}
    assert {"params.yaml", "suites/cpu.yaml"} <= named
    missing = [n for n in sorted(named - WRITTEN) if not (ROOT / n).exists()
               and not (ROOT / "profiles" / n).exists()]
    assert missing == []
