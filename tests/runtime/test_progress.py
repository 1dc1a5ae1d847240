"""The progress lines (pipeline/runtime/progress.py): a suite task finds its place from the
suite.json that cbench suite writes, and the ETA is the median measured cell time times the
cells left over the slots."""

from __future__ import annotations

import statistics

import pytest
import yaml

from pipeline.config.suite import load_suite
from pipeline.runtime.progress import Tally, duration, stage_desc, suite_task
from pipeline.runtime.suite_plan import write_suite
from tests.conftest import ROOT


@pytest.fixture
def suite_dir(tmp_path):
    body = {"params": {"grid": {"loss": ["infonce", "dcl"], "k": [4], "tau": [0.5],
                                "arch": ["linear"], "seed": [0, 1]}},
            "tasks": [{"name": "a"}, {"name": "b", "grid": {"seed": [0, 1, 2]}}, {"name": "c"}]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(body))
    (tmp_path / "dvc.yaml").write_bytes((ROOT / "dvc.yaml").read_bytes())
    write_suite(load_suite(tmp_path / "s.yaml", ROOT / "params.yaml"), tmp_path)
    return tmp_path / "runs" / "s"


def test_a_task_folder_knows_its_place_in_the_suite(suite_dir, monkeypatch):
    task = suite_task(suite_dir / "b")
    assert (task.suite, task.name, task.index, task.tasks) == ("s", "b", 2, 3)
    assert (task.cells_before, task.cells, task.cells_after, task.total) == (4, 6, 4, 14)
    monkeypatch.chdir(suite_dir / "b")
    assert stage_desc("search") == "s 2/3 b · search"


def test_outside_a_suite_there_is_no_task(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert suite_task() is None and stage_desc("cells") == "cells"
    (tmp_path.parent / "suite.json").write_text("{not json")  # someone else's file
    assert suite_task(tmp_path) is None


def test_the_eta_is_the_median_cell_time_times_the_cells_left_over_the_slots(suite_dir):
    tally = Tally(to_train=5, slots=2, suite=suite_task(suite_dir / "b"))
    assert tally.eta_seconds() is None and "training ETA after the first cell" in tally.postfix()
    walls = [4.0, 10.0, 6.0]
    for i, w in enumerate(walls):
        tally.finished("ok" if i else "failed", w)
    left = 2 + 4  # this stage's 2 pending cells and task c's 4
    assert tally.eta_seconds() == pytest.approx(statistics.median(walls) * left / 2)
    assert tally.postfix() == "running 2, failed 1 · suite 8/14 done · training ETA 18s"


@pytest.mark.parametrize(("seconds", "text"), [(42.4, "42s"), (190, "3m10s"), (3720, "1h02m"),
                                               (-1, "0s")])
def test_durations_read_as_people_write_them(seconds, text):
    assert duration(seconds) == text
