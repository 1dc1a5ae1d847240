"""A suite's workspace and its one DVC pipeline, written from the suite file and ``dvc.yaml``.

``cbench suite suites/<name>.yaml`` validates every task (:func:`pipeline.config.suite.load_suite`)
and writes, under ``runs/<name>/``:

- ``<task>/params.yaml`` for every task: params.yaml ⊕ the suite's params ⊕ the task's keys (the
  task's folder is a workspace like the project root: its ``data/`` and ``reports/``);
- ``suite.json``: the tasks (name, type, labelled, folder, cells) and the shared report settings,
  what the suite's report stage and the progress lines read;
- ``dvc.yaml``: the project's own stages once per task (``<task>-train``, ... run with
  ``wdir: <task>`` and the project's code; each task's ``resolve`` writes the stages' digests of
  params and code into the task's ``params.tracked.yaml``, so a code change reruns exactly the
  stages it reruns in the project's pipeline), then ``report``: the leaderboard across tasks
  (``stages/suite_report.py``) into ``runs/<name>/reports/``, which depends on the project files
  it imports (:func:`pipeline.config.code.imported_files`).

The cells live in the cell store, shared with every other run: a task whose cells some earlier
run trained reuses them. ``geometry`` (SupCon's simplex on free embeddings) depends on no task and
is not repeated per task. A task's report exits 3 when some of its cells failed; in the suite the
other tasks go on (the suite's report says which cells failed where).

Nothing is written when any task is invalid (the suite file is validated whole first), and
writing the same suite again leaves every file's bytes as they were.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from pipeline.config.code import imported_files
from pipeline.config.suite import Suite
from pipeline.runtime.progress import SUITE_JSON
from pipeline.runtime.store.files import atomic_write_bytes

RUNS = Path("runs")
NOT_PER_TASK = ("geometry",)  # stages of dvc.yaml that depend on no task
RESOLVE_CMD = "CBENCH_PROFILE= python -m stages.resolve"  # a task's params are its params.yaml
REPORT_OK = "python -m stages.report || test $? -eq 3"  # 3: some cells failed; the suite goes on
SUITE_REPORT_MODULE = "stages.suite_report"
SUITE_REPORT = f"python -m {SUITE_REPORT_MODULE}"
SUITE_OUT = "reports"


def suite_dir(suite: Suite, root: Path) -> Path:
    return root / RUNS / suite.name


def _paths(entries: list[Any] | None) -> list[str]:
    """The paths of a dvc.yaml list (``- path`` or ``- path: {options}``)."""
    out: list[Any] = []
    for entry in entries or []:
        out.extend(entry.keys() if isinstance(entry, dict) else [entry])
    return [str(p) for p in out]


def _produced(stages: dict[str, Any]) -> set[str]:
    return {p for s in stages.values() for key in ("outs", "metrics", "plots")
            for p in _paths(s.get(key))}


def code_path(back: str) -> str:
    """The shell prefix that makes ``python -m stages.<x>`` run the project's own code (the
    code the stage's dependencies hash) from a folder below the project's root. (``$PYTHONPATH``
    without braces: DVC reads ``${...}`` in a command as its own variables.)"""
    return f"PYTHONPATH={back}:$PYTHONPATH"


def _task_stage(name: str, stage: dict[str, Any], produced: set[str], back: str) -> dict[str, Any]:
    """``stage`` of the project's dvc.yaml as a stage of one task: run in the task's folder, its
    project files (code) reached through ``back`` (the way up from that folder to the root)."""
    out = dict(stage)
    out["wdir"] = name
    cmd = {"python -m stages.resolve": RESOLVE_CMD,
           "python -m stages.report": REPORT_OK}.get(stage["cmd"], stage["cmd"])
    out["cmd"] = f"{code_path(back)} {cmd}"
    out["deps"] = [d if d in produced else f"{back}/{d}" for d in _paths(stage.get("deps"))]
    return out


def pipeline_yaml(suite: Suite, root: Path) -> dict[str, Any]:
    """The suite's ``dvc.yaml`` as a mapping (see the module docstring)."""
    project = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    produced = _produced(project)
    back = os.path.relpath(root, suite_dir(suite, root) / "task")
    stages: dict[str, Any] = {}
    for task in suite.tasks:
        for name, stage in project.items():
            if name not in NOT_PER_TASK:
                stages[f"{task.name}-{name}"] = _task_stage(task.name, stage, produced, back)
    up = os.path.relpath(root, suite_dir(suite, root))
    # the board has no params.tracked.yaml of its own to carry a code digest: it depends on the
    # files it imports, as found by pipeline.config.code
    code = [p.relative_to(root.resolve()).as_posix()
            for p in imported_files(SUITE_REPORT_MODULE, root.resolve())]
    deps = [SUITE_JSON, *(f"{t.name}/reports/cells.csv" for t in suite.tasks),
            *(f"{t.name}/data/probe_fewshot_summary.parquet" for t in suite.tasks),
            *(f"{up}/{d}" for d in code)]
    stages["report"] = {"cmd": f"{code_path(up)} {SUITE_REPORT}", "deps": deps,
                        "outs": [{SUITE_OUT: {"cache": False}}]}
    return {"stages": stages}


def suite_json(suite: Suite) -> dict[str, Any]:
    """What ``stages/suite_report.py`` and the progress lines read: the shared report settings
    and every task's name, type, labels, folder and cell count."""
    report = suite.report
    return {"name": suite.name, "file": str(suite.path), "description": suite.description,
            "primary": report.primary, "group_by": list(report.group_by),
            "level": report.level, "alpha": report.alpha, "bootstrap": report.bootstrap,
            "tasks": [{"name": t.name, "type": t.type, "labelled": t.labelled,
                       "dataset": t.dataset, "folder": t.name, "cells": t.cells}
                      for t in suite.tasks]}


def _header(suite: Suite, what: str) -> str:
    return f"# {what}, generated from {suite.path} by `cbench suite`; do not edit\n"


class _Dumper(yaml.SafeDumper):
    """Writes repeated lists out in full (no ``&id001`` anchors): the file is read by people."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def write_suite(suite: Suite, root: Path) -> Path:
    """Write the suite's workspace under ``root/runs/<name>/``; returns its ``dvc.yaml``."""
    out = suite_dir(suite, root)
    for task in suite.tasks:
        text = yaml.safe_dump(dict(task.raw), sort_keys=False)
        atomic_write_bytes(out / task.name / "params.yaml",
                           (_header(suite, f"task {task.name}'s params") + text).encode())
    atomic_write_bytes(out / SUITE_JSON,
                       (json.dumps(suite_json(suite), indent=2) + "\n").encode())
    text = yaml.dump(pipeline_yaml(suite, root), Dumper=_Dumper, sort_keys=False, width=100)
    atomic_write_bytes(out / "dvc.yaml", (_header(suite, "the suite's pipeline") + text).encode())
    return out / "dvc.yaml"
