"""``cbench release``, ``release --check``, ``diff`` and ``site`` through the command line: exit
codes, the one-line error of the package, and a real params file's MLflow run."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from pipeline.cli import main
from pipeline.config import merge, read_yaml
from tests.conftest import ROOT, TINY, mlflow_runs
from tests.release.workspace import cells_frame, write_workspace


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    ws = write_workspace(tmp_path / "ws")
    monkeypatch.chdir(ws)
    return ws


def test_release_then_check_then_a_tampered_file(workspace, capsys):
    assert main(["release", "v1", "--no-mlflow"]) == 0
    assert "release v1: releases/v1/ and releases/v1.tar.gz, 18 cells" in capsys.readouterr().out
    assert main(["release", "--check", "v1"]) == 0
    assert "releases/v1: intact" in capsys.readouterr().out
    (workspace / "releases" / "v1" / "reports" / "cells.csv").write_text("x\n")
    assert main(["release", "--check", "v1"]) == 1
    assert "reports/cells.csv: changed" in capsys.readouterr().out


def test_an_existing_name_and_a_bad_name_fail_the_one_way(workspace, capsys):
    assert main(["release", "v1", "--no-mlflow"]) == 0
    capsys.readouterr()
    assert main(["release", "v1", "--no-mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cbench release: release 'v1': ") and "never overwritten" in err
    assert len(err.splitlines()) == 1
    assert main(["release", "../x"]) == 2
    assert "cbench release: release name '../x': must be 1 to 100" in capsys.readouterr().err
    assert main(["release", "--check", "nope"]) == 2
    assert "not a release (no MANIFEST.json)" in capsys.readouterr().err


def test_diff_and_its_ci_gate(workspace, tmp_path, capsys):
    assert main(["release", "v1", "--no-mlflow"]) == 0
    assert main(["diff", "releases/v1", ".", "--fail-on-change"]) == 0  # the same workspace
    write_workspace(workspace, cells_frame({"infonce": 0.3}))
    capsys.readouterr()
    assert main(["diff", "releases/v1", "."]) == 0  # a report, not a gate
    out = capsys.readouterr().out
    assert "moved beyond their interval" in out and "loss=infonce" in out
    assert main(["diff", "releases/v1", ".", "--fail-on-change", "-o", "d.md"]) == 1
    assert (workspace / "d.md").read_text() == out
    assert main(["diff", "releases/v1", str(tmp_path / "nothing")]) == 2


def test_site_and_the_results_schema(workspace, capsys):
    assert main(["release", "v1", "--no-mlflow"]) == 0
    assert main(["site", "releases", "-o", "site"]) == 0
    assert (workspace / "site" / "index.html").is_file()
    assert (workspace / "site" / "v1" / "aggregate.html").is_file()
    capsys.readouterr()
    assert main(["schema", "--results"]) == 0
    schema = json.loads(capsys.readouterr().out)
    results = json.loads((workspace / "releases" / "v1" / "results.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(results)
    assert main(["site", "nowhere"]) == 2


def test_a_release_is_logged_to_the_workspaces_mlflow(workspace, capsys):
    params = merge(read_yaml(ROOT / "params.yaml"), TINY)
    (workspace / "params.resolved.yaml").write_text(yaml.safe_dump(params))
    assert main(["release", "v1"]) == 0
    assert "logged as MLflow run" in capsys.readouterr().out
    runs = mlflow_runs(workspace / "mlruns.db")
    release = runs[runs["tags.cbench.kind"] == "release"]
    assert list(release["tags.cbench.release"]) == ["v1"]
