"""CHANGELOG.md (Keep a Changelog): an Unreleased section, and every entry says which numbers
it moves (a **Numbers:** line), so that a user upgrading can tell what changed in theirs."""

from __future__ import annotations

import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def _entries(text: str) -> list[str]:
    """The list items under the version sections (## [...]), each with its continuation lines."""
    body = text[text.index("\n## [") :]
    return [m.group(0) for m in re.finditer(r"^- .*(?:\n(?!- |#|\n).*)*", body, re.MULTILINE)]


def test_there_is_an_unreleased_section():
    assert re.search(r"^## \[Unreleased\]$", CHANGELOG.read_text(), re.MULTILINE)


def test_every_entry_says_which_numbers_move():
    entries = _entries(CHANGELOG.read_text())
    assert entries
    missing = [e.splitlines()[0] for e in entries if "**Numbers:**" not in e]
    assert not missing, f"entries without a **Numbers:** line: {missing}"


def test_the_entry_parser_sees_a_missing_numbers_line():
    text = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- a\n  b **Numbers:** none.\n- c\n"
    assert [("**Numbers:**" in e) for e in _entries(text)] == [True, False]
