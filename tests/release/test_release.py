"""``cbench release``: results.json against its schema and against cells.csv, the manifest's
digests, immutability, the archive, and ``--check`` finding a tampered file."""

from __future__ import annotations

import hashlib
import json
import math
import tarfile

import jsonschema
import pandas as pd
import pytest

from pipeline.release.bundle import (
    MANIFEST,
    ReleaseError,
    check_release,
    read_release,
    write_release,
)
from pipeline.release.results import results_document, schema, validate
from tests.release.workspace import cells_frame, write_workspace


@pytest.fixture
def released(tmp_path):
    ws = write_workspace(tmp_path / "ws")
    return ws, write_release("v1.0", ws, tmp_path / "releases", "f9f11fb")


def _digests(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_results_validate_and_match_cells_csv(released):
    ws, path = released
    document = json.loads((path / "results.json").read_text())
    jsonschema.Draft202012Validator(schema()).validate(document)  # the library, directly
    assert validate(document) == []
    cells = pd.read_csv(ws / "reports" / "cells.csv").set_index("cell_id")
    assert sorted(c["identity"]["cell_id"] for c in document["cells"]) == sorted(cells.index)
    for record in document["cells"]:
        row = cells.loc[record["identity"]["cell_id"]]
        assert record["config"]["loss"] == row.loss and record["config"]["k"] == row.k
        assert record["metrics"]["recall_at_1"]["value"] == pytest.approx(row.recall_at_1)
        assert record["metrics"]["risk_keval"]["se"]["value"] == row.risk_keval_se
        assert "anchors" in record["metrics"]["risk_keval"]["se"]["over"]
        cv = record["metrics"]["cv"]["interval"]
        assert (cv["lo"], cv["hi"]) == (row.cv_lo, row.cv_hi) and "rows" in cv["over"]
        assert "ad_mean" not in record["metrics"]  # NaN: absent, never null or NaN in JSON
        assert "control_cv" not in record["metrics"]  # derived columns stay in cells.csv
        cost = record["cost"]
        assert cost["wall_seconds"] == row.wall_seconds
        assert (cost["train_seconds"], cost["peak_rss_bytes"]) == (row.train_seconds,
                                                                   row.peak_rss_bytes)
        assert cost["device"] == "cpu" and cost["energy_source"] == "not measured"
        assert cost["energy_joules"] is None and cost["cuda_peak_bytes"] is None  # not recorded
    assert not any(isinstance(v, float) and math.isnan(v)
                   for c in document["cells"] for m in c["metrics"].values() for v in m.values()
                   if isinstance(v, float))


@pytest.mark.parametrize("breaks", [
    lambda d: d["cells"][0]["metrics"]["cv"]["interval"].pop("over"),  # an interval without unit
    lambda d: d["cells"][0].update(status="done"),
    lambda d: d["cells"][0]["metrics"].update(not_a_metric={"value": 1.0}),
    lambda d: d["cells"][0]["config"].update(colour="red"),
    lambda d: d.update(format="something/else@9"),
])
def test_the_schema_refuses_a_broken_document(breaks):
    document = results_document(cells_frame(), "x")
    breaks(document)
    assert validate(document)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)


def test_manifest_lists_every_file_with_its_digest(released):
    _, path = released
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["files"] == {k: v for k, v in _digests(path).items() if k != MANIFEST}
    assert {"reports/cells.csv", "reports/ranks.csv", "reports/plots/critical_difference.svg",
            "results.json", "REPRODUCE.md", "params.resolved.yaml"} <= set(manifest["files"])
    assert manifest["git_commit"] == "f9f11fb" and manifest["profile"] == "profiles/tiny.yaml"
    assert manifest["cells"] == {"total": 18, "ok": 18}
    assert {"torch", "ray", "dask", "mlflow", "dvc", "numpy", "scipy"} <= set(manifest["libraries"])
    assert "make run PROFILE=profiles/tiny.yaml" in (path / "REPRODUCE.md").read_text()
    assert check_release(path) == []


def test_the_archive_holds_the_folder(released):
    _, path = released
    with tarfile.open(path.parent / "v1.0.tar.gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert {f"v1.0/{k}": hashlib.sha256(v).hexdigest() for k, v in
            ((n.removeprefix("v1.0/"), b) for n, b in members.items())} == \
        {f"v1.0/{k}": v for k, v in _digests(path).items()}


def test_a_release_is_never_overwritten(released, tmp_path):
    ws, path = released
    before = _digests(path)
    (ws / "reports" / "cells.csv").write_text("changed\n")
    with pytest.raises(ReleaseError, match=r"release 'v1.0': .*v1.0 exists, and a release is "
                                           r"never overwritten"):
        write_release("v1.0", ws, path.parent, "other")
    assert _digests(path) == before
    (path.parent / "v2").mkdir()  # a stray folder of that name counts too
    with pytest.raises(ReleaseError, match="v2 exists"):
        write_release("v2", ws, path.parent, "other")


@pytest.mark.parametrize("name", ["", "../up", ".hidden", "a/b", "x" * 101, "sp ace", "v1;rm"])
def test_a_bad_name_is_refused_with_the_rule(name, tmp_path):
    ws = write_workspace(tmp_path / "ws")
    with pytest.raises(ReleaseError, match=r"release name .*: must be 1 to 100 characters"):
        write_release(name, ws, tmp_path / "releases", "c")
    assert not (tmp_path / "releases").exists()


def test_a_workspace_without_a_report_is_refused_before_writing(tmp_path):
    (tmp_path / "ws").mkdir()
    with pytest.raises(ReleaseError, match=r"no reports/cells.csv; run the pipeline"):
        write_release("v1", tmp_path / "ws", tmp_path / "releases", "c")
    assert not (tmp_path / "releases").exists()


def test_check_reports_every_tampered_file(released):
    _, path = released
    with (path / "reports" / "ranks.csv").open("a") as f:
        f.write("9,evil,0.1\n")
    (path / "reports" / "leaderboard.md").unlink()
    (path / "reports" / "extra.txt").write_text("x")
    document = json.loads((path / "results.json").read_text())
    document["cells"][0]["status"] = "excellent"
    (path / "results.json").write_text(json.dumps(document))
    problems = check_release(path)
    assert any(p.startswith("reports/ranks.csv: changed") for p in problems)
    assert "reports/leaderboard.md: missing (listed in MANIFEST.json)" in problems
    assert "reports/extra.txt: not in MANIFEST.json (added after the release)" in problems
    assert any(p.startswith("results.json: changed") for p in problems)
    assert any(p.startswith("results.json: cells/0/status") for p in problems)
    (path / "results.json").write_text("{not json")
    assert any("cannot be read as JSON" in p for p in check_release(path))


def test_read_release_refuses_a_folder_that_is_not_one(tmp_path):
    with pytest.raises(ReleaseError, match=r"not a release \(no MANIFEST.json\)"):
        read_release(tmp_path)


def test_a_release_is_one_mlflow_run_with_its_archive(released, tmp_path, monkeypatch):
    from pipeline.runtime.tracking.runs import Tracker

    _, path = released
    monkeypatch.chdir(tmp_path)  # the SQLite store's default artifact root is relative to here
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlruns.db'}", "contrastive-bench")
    run_id = tracker.log_release("v1.0", "f9f11fb", path.parent / "v1.0.tar.gz",
                                 {"total": 18, "ok": 18})
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["cbench.kind"] == "release" and run.data.tags["cbench.release"] == "v1.0"
    assert run.data.tags["mlflow.source.git.commit"] == "f9f11fb"
    assert run.data.params == {"cells.total": "18", "cells.ok": "18"}
    assert [a.path for a in tracker.client.list_artifacts(run_id)] == ["v1.0.tar.gz"]
