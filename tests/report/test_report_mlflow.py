"""The report stage's MLflow logging (pipeline.runtime.tracking.report_metrics.track) against a real
SQLite store: each cell's report metrics land in its training's run exactly as the one-at-a-time
path logged them (names, values, steps, runs); values a run already holds are not logged again;
reports/ goes to the workspace's train run once, and a rerun with the same reports creates no
run. The stage's logger (ReportLogger, a forked process) logs the same; the stage's own process
never imports MLflow."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from pipeline.runtime.tracking import report_metrics, runs
from pipeline.runtime.tracking.report_logger import ReportLogger
from pipeline.runtime.tracking.runs import Tracker, cell_metrics, run_key
from tests.conftest import ROOT, mlflow_runs

EXPERIMENT = "contrastive-bench"  # what tests.conftest.mlflow_runs reads


@pytest.fixture
def grid() -> pd.DataFrame:
    """Five cells; the last two share one training (they differ in k only)."""
    return pd.DataFrame({"cell_id": ["c0", "c1", "c2", "c3", "c4"],
                         "training_id": ["c0", "c1", "c2", "t3", "t3"],
                         "version": ["v1"] * 5, "loss": ["infonce"] * 5,
                         "k": [4, 8, 16, 4, 8], "tau": [0.5] * 5})


@pytest.fixture
def values(grid, rng) -> dict[str, list[tuple[str, float]]]:
    """What Report.mlflow holds: per cell id, (metric name, value)."""
    names = ["recall_at_1", "recall_at_1_lo", "recall_at_1_hi", "align", "uniform"]
    return {c: [(n, float(v)) for n, v in zip(names, rng.normal(size=len(names)), strict=True)]
            for c in grid.cell_id}


def _store(tmp_path, grid: pd.DataFrame, experiment: str = EXPERIMENT) -> Tracker:
    """The experiment ``experiment`` in the SQLite store ``mlruns.db`` (created once: its schema
    takes seconds), with one finished run per training of ``grid``."""
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlruns.db'}", experiment)
    for training in dict.fromkeys(grid.training_id):
        tracker.end(tracker.cell_run(run_key(training, "v1"), None, {}, existing={}))
    return tracker


def _one_at_a_time(tracker: Tracker, grid: pd.DataFrame, values) -> None:
    """The report stage's logging before: one log_batch into each run, every metric."""
    run_ids = {key: run.info.run_id for key, run in tracker.cell_runs().items()}
    for run_id, metrics in report_metrics._run_metrics(run_ids, grid, values).items():
        tracker.log(run_id, metrics=metrics)


def _runs(tracker: Tracker) -> list:
    """The cell runs of the tracker's experiment, read through a client of their own."""
    client = MlflowClient(tracking_uri=tracker.uri)
    return [r for r in client.search_runs([tracker.experiment_id], max_results=1000)
            if "cell_id" in r.data.tags]


def _logged(tracker: Tracker) -> dict[str, dict[str, list[tuple[float, int]]]]:
    """Training id → metric name → every (value, step) logged, read back from the database."""
    client = MlflowClient(tracking_uri=tracker.uri)
    return {r.data.tags["cell_id"]: {
        k: sorted((m.value, m.step) for m in client.get_metric_history(r.info.run_id, k))
        for k in r.data.metrics} for r in _runs(tracker)}


def _latest(tracker: Tracker) -> dict[str, dict[str, float]]:
    """Training id → its run's latest value of each metric, as search_runs reads them."""
    return {r.data.tags["cell_id"]: dict(r.data.metrics) for r in _runs(tracker)}


def _reports(tmp_path, text: str):
    folder = tmp_path / "reports"
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    (folder / "leaderboard.md").write_text(text)
    (folder / "plots" / "a.svg").write_text("<svg/>")
    return folder


def test_changed_metrics_are_logged_as_the_one_at_a_time_path_did(tmp_path, monkeypatch, grid,
                                                                  values):
    monkeypatch.chdir(tmp_path)
    old, new = _store(tmp_path, grid, "one-at-a-time"), _store(tmp_path, grid)
    _one_at_a_time(old, grid, values)
    reports = _reports(tmp_path, "board")
    assert report_metrics.track(new, grid, values, reports)[0] == 4  # one batch per training's run
    expected = _logged(old)
    assert _logged(new) == expected
    # from the definition: an unshared cell's run holds its values at step 0; the shared
    # training's run holds both cells' under the k that tells them apart
    assert expected["c1"] == {k: [(v, 0)] for k, v in values["c1"]}
    assert expected["t3"] == {f"{k}/k_{kk}": [(v, 0)] for c, kk in (("c3", 4), ("c4", 8))
                              for k, v in values[c]}

    # a rerun with the same values logs nothing: no metric row is added
    assert report_metrics.track(new, grid, values, reports) == (0, None)
    assert _logged(new) == expected

    # one value changed: only its run gets a batch, holding only that metric; the latest values
    # equal those the one-at-a-time path leaves
    values["c2"][0] = (values["c2"][0][0], values["c2"][0][1] + 1.0)
    assert report_metrics.track(new, grid, values, reports)[0] == 1
    _one_at_a_time(old, grid, values)
    assert _latest(new) == _latest(old)
    now = _logged(new)
    assert now["c2"]["recall_at_1"] == sorted([expected["c2"]["recall_at_1"][0],
                                               (values["c2"][0][1], 0)])
    assert {c: m for c, m in now.items() if c != "c2"} == {c: m for c, m in expected.items()
                                                           if c != "c2"}
    assert {k: v for k, v in now["c2"].items() if k != "recall_at_1"} == \
        {k: v for k, v in expected["c2"].items() if k != "recall_at_1"}


def test_reports_go_once_to_the_train_run_and_a_rerun_creates_no_run(tmp_path, monkeypatch,
                                                                     grid, values):
    monkeypatch.chdir(tmp_path)
    tracker = _store(tmp_path, grid)
    db = tmp_path / "mlruns.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    train = tracker.start_parent("train", {})
    reports = _reports(tmp_path, "board")
    # this repro's train run
    assert report_metrics.track(tracker, grid, values, reports)[1] == train
    assert sorted(f.path for f in client.list_artifacts(train, "reports")) == [
        "reports/leaderboard.md", "reports/plots"]
    before = mlflow_runs(db)

    assert report_metrics.track(tracker, grid, values, reports) == (0, None)  # nothing new
    after = mlflow_runs(db)
    assert sorted(after.run_id) == sorted(before.run_id)

    # other reports after a train invocation that already holds its own: a report run
    changed = _reports(tmp_path, "another board")
    logged, run_id = report_metrics.track(tracker, grid, values, changed)
    assert logged == 0 and run_id not in (None, train)
    run = client.get_run(run_id)
    assert (run.data.tags["cbench.stage"], run.info.status) == ("report", "FINISHED")
    path = client.download_artifacts(run_id, "reports/leaderboard.md", str(tmp_path / "got"))
    assert open(path).read() == "another board"
    assert len(mlflow_runs(db)) == len(before) + 1
    assert report_metrics.track(tracker, grid, values, changed) == (0, None)
    assert len(mlflow_runs(db)) == len(before) + 1


def test_the_folder_digest_changes_with_a_name_or_a_byte(tmp_path):
    folder = _reports(tmp_path, "board")
    first = report_metrics.folder_digest(folder)
    assert report_metrics.folder_digest(folder) == first
    (folder / "leaderboard.md").write_text("boarD")
    assert report_metrics.folder_digest(folder) != first
    (folder / "leaderboard.md").write_text("board")
    assert report_metrics.folder_digest(folder) == first
    (folder / "leaderboard.md").rename(folder / "leaderboard.txt")
    assert report_metrics.folder_digest(folder) != first
    assert len(first) == 64


def test_the_cell_runs_read_in_another_process_are_the_runs_search_returns(tmp_path, monkeypatch,
                                                                           grid, values):
    """What cell_metrics reads (in a spawned process, so plain values) is every cell run's id
    and latest metrics, as MLflow's search returns them; track given it logs what track reading
    them itself logs."""
    monkeypatch.chdir(tmp_path)
    tracker = _store(tmp_path, grid)
    reports = _reports(tmp_path, "board")
    report_metrics.track(tracker, grid, values, reports)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        read = pool.submit(cell_metrics, tracker.uri, EXPERIMENT).result()
    expected = {key: (run.info.run_id, run.data.metrics)
                for key, run in tracker.cell_runs().items()}
    assert read == expected and len(read) == 4  # four trainings, each with its metrics
    assert all(len(metrics) == len(values["c0"]) * (2 if key.startswith("t3") else 1)
               for key, (_, metrics) in read.items())

    # a change logged with the other process's reading, then a rerun that reads them itself
    values["c1"][1] = (values["c1"][1][0], values["c1"][1][1] - 2.0)
    assert report_metrics.log_metrics(tracker, grid, values, read) == 1
    assert report_metrics.log_metrics(tracker, grid, values) == 0
    assert _latest(tracker)["c1"] == dict(values["c1"])



# --- the report stage's logger: the same logging in a forked process --------------------------

@pytest.mark.parametrize("background", [True, False])
def test_the_logger_logs_what_track_logs(tmp_path, monkeypatch, grid, values, background):
    monkeypatch.chdir(tmp_path)
    expected, got = _store(tmp_path, grid, "by-track"), _store(tmp_path, grid)
    reports = _reports(tmp_path, "board")
    want = report_metrics.track(expected, grid, values, reports)
    with ReportLogger(got.uri, EXPERIMENT, grid, background=background) as logger:
        assert logger.background is background
        logger.metrics(values)
        logged, run_id = logger.reports(reports)
    assert logged == want[0] == 4 and run_id is not None and run_id != want[1]
    assert _logged(got) == _logged(expected)
    client = MlflowClient(tracking_uri=got.uri)
    assert client.get_run(run_id).data.tags["cbench.stage"] == "report"
    assert [f.path for f in client.list_artifacts(run_id, "reports")] == [
        "reports/leaderboard.md", "reports/plots"]
    with ReportLogger(got.uri, EXPERIMENT, grid, background=background) as logger:
        logger.metrics(values)  # a rerun: the same values and reports, nothing logged
        assert logger.reports(reports) == (0, None)


def test_an_error_in_the_logging_process_is_raised_with_its_traceback(tmp_path, monkeypatch,
                                                                     grid, values):
    monkeypatch.chdir(tmp_path)
    tracker = _store(tmp_path, grid)

    def failing(*args, **kwargs):  # the forked process sees this module's patched function
        raise OSError("the store is read-only")

    monkeypatch.setattr(report_metrics, "log_metrics", failing)
    with pytest.raises(RuntimeError, match="(?s)MLflow logging failed in its process.*"
                                           "OSError: the store is read-only"):
        with ReportLogger(tracker.uri, EXPERIMENT, grid, background=True) as logger:
            logger.metrics(values)
            logger.reports(_reports(tmp_path, "board"))
    assert not logger._process.is_alive()


def test_a_logger_that_failed_before_the_metrics_says_so_when_handed_them(tmp_path, monkeypatch,
                                                                          grid, values):
    monkeypatch.chdir(tmp_path)
    tracker = _store(tmp_path, grid)

    def failing(uri, experiment):
        raise OSError("cannot read the runs")

    monkeypatch.setattr(runs, "cell_metrics", failing)  # seen by the forked process
    logger = ReportLogger(tracker.uri, EXPERIMENT, grid, background=True)
    logger._process.join(60)  # it has failed and ended before the report is built
    with pytest.raises(RuntimeError, match="(?s)failed in its process.*cannot read the runs"):
        with logger:
            logger.metrics(values)
    assert _logged(tracker) == {c: {} for c in ("c0", "c1", "c2", "t3")}


def test_a_report_that_fails_before_its_metrics_logs_nothing(tmp_path, monkeypatch, grid,
                                                              values):
    monkeypatch.chdir(tmp_path)
    tracker = _store(tmp_path, grid)
    before = _logged(tracker)
    logger = ReportLogger(tracker.uri, EXPERIMENT, grid, background=True)
    with pytest.raises(ValueError, match="the build failed"):
        with logger:
            raise ValueError("the build failed")
    assert not logger._process.is_alive() and logger._process.exitcode == 0
    assert _logged(tracker) == before
    assert len(mlflow_runs(tmp_path / "mlruns.db")) == len(before)  # no report run either


def test_the_report_stage_imports_no_mlflow_itself():
    """The stage's process leaves MLflow to its logger: importing it must not load MLflow (or
    the report's rendering, imported once the logger has forked)."""
    code = ("import sys, stages.report; print(' '.join(m for m in "
            "('mlflow', 'sqlalchemy', 'matplotlib') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout.split()
    assert loaded == []
