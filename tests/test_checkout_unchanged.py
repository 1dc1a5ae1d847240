"""A test run leaves the checkout as it found it: tests/conftest.py records each tracked file
that differs from HEAD (with its content's digest) when the run starts and fails the run when
the set or a digest differs at its end. Checked here on a git repository of its own."""

from __future__ import annotations

import subprocess

from tests.conftest import changed_files, tracked_state


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_changed_tracked_file_is_found_and_an_untracked_one_is_not(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.png").write_bytes(b"one")
    (tmp_path / "b.txt").write_text("b")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    before = tracked_state(tmp_path)
    assert before == {}
    (tmp_path / "new.txt").write_text("untracked outputs are not the checkout's")
    assert changed_files(before, tracked_state(tmp_path)) == []
    (tmp_path / "a.png").write_bytes(b"two")  # a screenshot rewritten by a test
    middle = tracked_state(tmp_path)
    assert changed_files(before, middle) == ["a.png"]
    (tmp_path / "a.png").write_bytes(b"three")  # changed again: its digest moves
    assert changed_files(middle, tracked_state(tmp_path)) == ["a.png"]
    (tmp_path / "b.txt").unlink()
    assert changed_files(middle, tracked_state(tmp_path)) == ["a.png", "b.txt"]
    assert tracked_state(tmp_path / "not-a-repo") is None
