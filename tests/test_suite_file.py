"""Suite files (pipeline/config/suite.py) and the suite's workspace and DVC pipeline
(pipeline/runtime/suite_plan.py, ``cbench suite``): validation before any work, the merge rule,
cells shared with other runs, and a dvc.yaml whose every path is real."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline.cli import main
from pipeline.config import ConfigError, expand, load
from pipeline.config.suite import load_suite
from pipeline.runtime.suite_plan import NOT_PER_TASK, pipeline_yaml, write_suite
from tests.conftest import ROOT
from tests.test_dvc_deps import imported_files

PROJECT_STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _suite(tmp_path: Path, body: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(body))
    return path


def _load(tmp_path: Path, body: dict):
    return load_suite(_suite(tmp_path, body), ROOT / "params.yaml")


SMALL = {"grid": {"loss": ["infonce", "dcl"], "k": [4], "tau": [0.5], "arch": ["linear"],
                  "seed": [0, 1]}}


@pytest.mark.parametrize("name", ["cpu", "paper"])
def test_the_shipped_suites_validate(name):
    suite = load_suite(ROOT / "suites" / f"{name}.yaml", ROOT / "params.yaml")
    assert suite.name == name and len(suite.tasks) >= 5
    assert {t.type for t in suite.tasks} == {"vectors", "images"}
    assert any(t.labelled for t in suite.tasks) and not all(t.labelled for t in suite.tasks)
    assert len({t.dataset for t in suite.tasks}) == len(suite.tasks)


def test_a_task_is_params_then_suite_then_its_own_keys(tmp_path):
    suite = _load(tmp_path, {"params": {**SMALL, "train": {"epochs": 3}},
                             "tasks": [{"name": "a", "data": {"name": "laplace"}},
                                       {"name": "b", "data": {"name": "gaussian_mixture"},
                                        "train": {"epochs": 1}}]})
    a, b = suite.tasks
    assert (a.params.train.epochs, b.params.train.epochs) == (3, 1)
    assert a.params.train.lr == load(ROOT / "params.yaml").train.lr  # from params.yaml
    assert (a.type, a.labelled, b.labelled) == ("vectors", False, True)


def test_a_task_of_another_dataset_does_not_inherit_the_suites_data_options(tmp_path):
    """params.yaml's laplace views (a, noise_std, ...) mean nothing to images: the digits task
    gets its dataset's defaults, not an error and not the other dataset's options."""
    suite = _load(tmp_path, {"params": SMALL, "tasks": [
        {"name": "digits", "data": {"name": "digits", "n_train": 1000, "n_heldout": 797},
         "grid": {"n": [1000]}, "search": {"anchors": 300}}]})
    (task,) = suite.tasks
    assert task.type == "images" and task.labelled
    assert "a" not in task.params.data.augment and "crop_scale" in task.params.data.augment


def test_a_task_like_params_yaml_shares_its_cells(tmp_path):
    """The cell store shares cells across runs by id: a task that changes nothing has exactly the
    cells of the project's own run."""
    suite = _load(tmp_path, {"tasks": [{"name": "same"}]})
    assert ([c.cell_id for c in expand(suite.tasks[0].params)]
            == [c.cell_id for c in expand(load(ROOT / "params.yaml"))])


BAD = [
    ({"tasks": []}, "tasks"),
    ({"tasks": [{"data": {"name": "laplace"}}]}, "tasks[0].name"),
    ({"tasks": [{"name": "Bad Name"}]}, "tasks[0].name = 'Bad Name'"),
    ({"tasks": [{"name": "a"}, {"name": "a"}]}, "tasks[a].name = 'a': two tasks"),
    ({"tasks": [{"name": "reports"}]}, "tasks[reports].name = 'reports': reserved"),
    ({"tasks": [{"name": "a", "type": "images"}]}, "tasks[a].type = 'images'"),
    ({"tasks": [{"name": "a", "tracking": {"experiment": "x"}}]}, "tasks[a].tracking"),
    ({"tasks": [{"name": "a", "grid": {"k": [0]}}]}, "tasks[a].grid.k"),
    ({"tasks": [{"name": "a", "data": {"name": "nope"}}]}, "tasks[a].data.name = 'nope'"),
    ({"tasks": [{"name": "a"}, {"name": "b", "report": {"primary": "risk_keval"}}]},
     "report.primary differs between tasks"),
    ({"task": [{"name": "a"}]}, "task = "),
    ({"name": "x y", "tasks": [{"name": "a"}]}, "name = 'x y'"),
    ({"tasks": ["laplace"]}, "tasks[0] = 'laplace'"),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_a_bad_suite_names_the_file_the_task_and_the_key(tmp_path, body, message):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, body)
    assert message in str(err.value) and str(tmp_path / "s.yaml") in str(err.value)


def test_every_bad_task_is_reported_at_once_and_nothing_is_written(tmp_path, monkeypatch,
                                                                 capsys):
    path = _suite(tmp_path, {"tasks": [{"name": "a", "grid": {"k": [0]}},
                                       {"name": "b", "train": {"epochs": -1}},
                                       {"name": "c"}]})
    (tmp_path / "dvc.yaml").write_bytes((ROOT / "dvc.yaml").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(["suite", str(path), "--params", str(ROOT / "params.yaml")]) == 2
    err = capsys.readouterr().err
    assert "tasks[a].grid.k" in err and "tasks[b].train.epochs" in err
    assert not (tmp_path / "runs").exists()


def test_a_missing_suite_file_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["suite", "suites/nope.yaml"]) == 2  # not the project's root
    assert "cbench suite: no dvc.yaml in" in capsys.readouterr().err
    (tmp_path / "dvc.yaml").write_bytes((ROOT / "dvc.yaml").read_bytes())
    assert main(["suite", "suites/nope.yaml"]) == 2
    assert "cbench suite: suites/nope.yaml: no such suite file" in capsys.readouterr().err


def _two_tasks(tmp_path: Path):
    return _load(tmp_path, {"params": SMALL, "tasks": [
        {"name": "vec", "data": {"name": "laplace", "options": {"input_dim": 16}}},
        {"name": "mix", "data": {"name": "gaussian_mixture",
                                 "options": {"input_dim": 16, "components": 4}}}]})


def test_the_suites_pipeline_runs_every_task_stage_in_its_folder(tmp_path):
    suite = _two_tasks(tmp_path)
    stages = pipeline_yaml(suite, ROOT)["stages"]
    per_task = [s for s in PROJECT_STAGES if s not in NOT_PER_TASK]
    assert set(stages) == {f"{t}-{s}" for t in ("vec", "mix") for s in per_task} | {"report"}
    for task in ("vec", "mix"):
        for name in per_task:
            stage = stages[f"{task}-{name}"]
            assert stage["wdir"] == task
            assert stage["outs"] == PROJECT_STAGES[name].get("outs")
            assert stage.get("params") == PROJECT_STAGES[name].get("params")
    assert stages["vec-report"]["cmd"].endswith("python -m stages.report || test $? -eq 3")
    assert "CBENCH_PROFILE= python -m stages.resolve" in stages["mix-resolve"]["cmd"]


def _dep_paths(stages: dict, suite_dir: Path) -> list[tuple[str, Path]]:
    return [(name, (suite_dir / stage.get("wdir", ".") / d).resolve())
            for name, stage in stages.items() for d in stage.get("deps", [])]


def _outputs(stages: dict, suite_dir: Path) -> set[str]:
    """Every stage's outputs, with deps or without (prepare)."""
    return {str((suite_dir / stage.get("wdir", ".") / p).resolve())
            for stage in stages.values() for key in ("outs", "metrics", "plots")
            for e in stage.get(key, []) for p in (e if isinstance(e, dict) else [e])}


def test_every_dependency_is_a_project_file_or_an_output_of_the_suite(tmp_path):
    suite = _two_tasks(tmp_path)
    stages = pipeline_yaml(suite, ROOT)["stages"]
    suite_dir = ROOT / "runs" / suite.name
    outputs = _outputs(stages, suite_dir)
    outputs.add(str((suite_dir / "suite.json").resolve()))  # written by cbench suite
    for name, path in _dep_paths(stages, suite_dir):
        assert path.exists() or str(path) in outputs, (name, path)
        if path.exists():
            assert path.is_relative_to(ROOT.resolve()), (name, path)


def test_the_suite_report_depends_on_every_module_it_imports(tmp_path):
    suite = _two_tasks(tmp_path)
    report = pipeline_yaml(suite, ROOT)["stages"]["report"]
    suite_dir = ROOT / "runs" / suite.name
    deps = [(suite_dir / d).resolve() for d in report["deps"]]
    missing = [f for f in imported_files("stages.suite_report")
               if not any(f == d or f.is_relative_to(d) for d in deps)]
    assert not missing, missing


def test_writing_a_suite_twice_leaves_every_byte(tmp_path):
    suite = _two_tasks(tmp_path)
    (tmp_path / "dvc.yaml").write_bytes((ROOT / "dvc.yaml").read_bytes())
    first = write_suite(suite, tmp_path)
    files = {p: p.read_bytes() for p in first.parent.rglob("*") if p.is_file()}
    write_suite(suite, tmp_path)
    assert {p: p.read_bytes() for p in first.parent.rglob("*") if p.is_file()} == files
    info = json.loads((first.parent / "suite.json").read_text())
    assert [t["name"] for t in info["tasks"]] == ["vec", "mix"]
    assert [t["cells"] for t in info["tasks"]] == [4, 4]
    # each task's params.yaml is the task: validated again it gives the same cells
    for task in suite.tasks:
        again = load(first.parent / task.name / "params.yaml")
        assert ([c.cell_id for c in expand(again)]
                == [c.cell_id for c in expand(task.params)])


IGNORED = {"runs/cpu/dvc.yaml": False, "runs/cpu/dvc.lock": False,
           "runs/cpu/suite.json": True, "runs/cpu/mnist/params.yaml": True,
           "runs/cpu/mnist/data/grid.json": True, "runs/cpu/reports/suite.md": True}


def test_git_ignores_a_suites_outputs_but_not_its_pipeline(tmp_path):
    """DVC refuses a git-ignored dvc.yaml, and drops the stages whose folder (wdir) git ignores:
    the project's .gitignore leaves those and ignores every output."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    (tmp_path / ".gitignore").write_bytes((ROOT / ".gitignore").read_bytes())
    for path in IGNORED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    status = subprocess.run(["git", "status", "--porcelain", "--ignored", "-uall"],
                            cwd=tmp_path, capture_output=True, text=True, check=True,
                            env=env).stdout.splitlines()
    ignored = {line[3:] for line in status if line.startswith("!! ")}
    untracked = {line[3:] for line in status if line.startswith("?? ")}
    for path, want in IGNORED.items():
        assert (path in ignored) is want and (path in untracked) is not want, (path, status)
    for folder in ("runs/cpu/mnist", "runs/cpu/reports"):  # the stage folders themselves
        proc = subprocess.run(["git", "check-ignore", "-q", folder], cwd=tmp_path, env=env)
        assert proc.returncode == 1, folder
