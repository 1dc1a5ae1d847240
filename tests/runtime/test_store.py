"""The cell store: versions, intact cells, damaged files, staging, claims, the project root."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from pipeline.runtime.store import files, folders, layout
from pipeline.runtime.store.claims import Claims, Holder


def _cell(folder, status="ok", contents=None, finished=1.0):
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (contents or {}).items():
        (folder / name).write_bytes(data)
    record = {"status": status, "finished_at": finished, "reason": "" if status == "ok" else "x"}
    if status == "ok":
        record["files"] = folders.checksums(folder, sorted(contents or {}))
    files.atomic_write_json(folder / "cell.json", record)


def _files(data):
    """A good cell's files (layout.REQUIRED), each holding ``data``."""
    return {name: data for name in layout.REQUIRED if name != "cell.json"}


def test_inspect_done_failed_and_missing(tmp_path):
    assert folders.inspect(tmp_path / "nothing").status == "todo"
    _cell(tmp_path / "a", contents={"embeddings.parquet": b"abc" * 100})
    assert folders.inspect(tmp_path / "a").status == "done"
    _cell(tmp_path / "f", status="failed")
    assert folders.inspect(tmp_path / "f").status == "failed"
    (tmp_path / "half").mkdir()
    assert folders.inspect(tmp_path / "half") == folders.CellState("todo", problem="no cell.json")


def test_a_truncated_or_altered_file_makes_the_cell_todo(tmp_path):
    _cell(tmp_path / "a",
          contents={"embeddings.parquet": b"abc" * 100, "model.safetensors": b"w" * 9})
    (tmp_path / "a" / "embeddings.parquet").write_bytes(b"abc" * 50)
    state = folders.inspect(tmp_path / "a")
    assert (state.status == "todo"
            and "embeddings.parquet has 150 bytes, 300 recorded" in state.problem)
    (tmp_path / "a" / "embeddings.parquet").write_bytes(b"abd" * 100)  # same size, other bytes
    assert "does not match its recorded SHA-256" in folders.inspect(tmp_path / "a").problem
    (tmp_path / "a" / "embeddings.parquet").unlink()
    assert folders.inspect(tmp_path / "a").problem == "embeddings.parquet is missing"


def test_a_requested_snapshot_must_be_recorded(tmp_path):
    _cell(tmp_path / "a", contents={"embeddings.parquet": b"z", "embeddings_e0000.parquet": b"y"})
    assert folders.inspect(tmp_path / "a", [0]).status == "done"
    assert folders.inspect(tmp_path / "a", [0, 5]).problem == "no snapshot for epochs [5]"


def test_versions_are_listed_newest_first(tmp_path):
    _cell(tmp_path / "c1" / "old", finished=1.0)
    _cell(tmp_path / "c1" / "new", finished=2.0)
    (tmp_path / "c1" / "broken").mkdir()
    assert folders.versions(tmp_path, "c1") == ["new", "old"]
    assert folders.versions(tmp_path, "nope") == []


def test_publish_puts_the_staged_folder_in_place_in_one_rename(tmp_path):
    final = tmp_path / "c" / "v"
    work = files.staging_dir(final)
    _cell(work, contents=_files(b"new"))
    published = folders.publish(work, final)
    assert not published.kept and published.record["status"] == "ok"
    assert ((final / "embeddings.parquet").read_bytes() == b"new"
            and sorted(os.listdir(tmp_path / "c")) == ["v"])


def test_publish_replaces_a_failure_but_never_a_done_cell(tmp_path):
    final = tmp_path / "c" / "v"
    _cell(final, status="failed")
    better = files.staging_dir(final)
    _cell(better, contents=_files(b"good"))
    assert not folders.publish(better, final).kept  # a failure gives way to a good cell
    later = files.staging_dir(final)
    _cell(later, contents=_files(b"other"))
    assert folders.publish(later, final).kept  # the first good result stays
    failure = files.staging_dir(final)
    _cell(failure, status="failed")
    assert folders.publish(failure, final).kept  # and a failure never replaces it
    assert ((final / "embeddings.parquet").read_bytes() == b"good"
            and folders.inspect(final).status == "done")
    assert sorted(os.listdir(tmp_path / "c")) == ["v"]  # the discarded copies are gone


def test_project_root_from_dvc_and_from_an_experiment_copy(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    copy = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "standalone" / "tmpabc"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    assert folders.project_root() == (tmp_path / "repo").resolve()
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "elsewhere"))
    assert folders.project_root() == (tmp_path / "elsewhere").resolve()


def test_default_store(monkeypatch, tmp_path):
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path / "s"))
    assert folders.store_root(None) == tmp_path / "s"
    monkeypatch.delenv("CBENCH_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert folders.store_root(None) == tmp_path / "cache" / "contrastive-bench"
    assert str(folders.store_root("s3://bucket/prefix")) == "s3://bucket/prefix"


def test_a_live_claim_blocks_and_a_released_one_does_not(tmp_path):
    with Claims(tmp_path) as a, Claims(tmp_path) as b:
        assert a.try_claim("c/v") and a.try_claim("c/v")  # idempotent for the holder
        assert not b.try_claim("c/v")
        assert b.holder("c/v").driver == a.me.driver
        a.release("c/v")
        assert b.holder("c/v") is None and b.try_claim("c/v")
    assert not (tmp_path / "claims" / "c-v.json").exists()  # released on exit


def test_a_dead_drivers_claim_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    with Claims(tmp_path) as mine:
        # same kernel and PID namespace (this test's): the PID is checked
        ghost = Holder("ghost", mine.me.host, int(dead.stdout), time.time(), mine.me.boot,
                       mine.me.pidns)
        files.atomic_write_json(tmp_path / "claims" / "c-v.json", ghost.__dict__)
        assert mine.holder("c/v") is None  # its process is gone
        assert mine.try_claim("c/v")


def test_a_silent_driver_on_another_host_times_out(tmp_path):
    with Claims(tmp_path, ttl=0.5) as mine:
        other = Holder("far", "another-host", 1, time.time() - 60)
        files.atomic_write_json(tmp_path / "claims" / "c-v.json", other.__dict__)
        files.atomic_write_json(tmp_path / "claims" / "drivers" / "far.json",
                                  {**other.__dict__, "beat": time.time()})
        assert not mine.try_claim("c/v")  # it beats
        time.sleep(0.7)
        assert mine.try_claim("c/v")  # it stopped beating


def test_concurrent_claims_have_one_winner(tmp_path):
    """Processes that ask at the same moment (released together from a barrier): one wins."""
    code = ("import os, sys, time; from pipeline.runtime.store.claims import Claims\n"
            "with Claims(sys.argv[1]) as c:\n"
            "    print('ready', flush=True)\n"
            "    while not os.path.exists(sys.argv[2]): time.sleep(0.01)\n"
            "    print(int(c.try_claim('cell/v')), flush=True); sys.stdin.read()\n")
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(go)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    go.touch()
    wins = [int(p.stdout.readline()) for p in procs]  # all hold on until their stdin closes
    for p in procs:
        p.communicate(timeout=60)
    assert sum(wins) == 1


def test_a_cell_finished_by_another_driver_after_the_plan_is_not_trained_again(tmp_path,
                                                                                tiny_params):
    """The race of two drivers on one store: the plan said 'train', but by the time this driver
    claims the cell the other has trained it and released its claim. The claim is not enough:
    the cell is looked at again under it, and reused."""
    from pipeline.config import expand, from_mapping
    from pipeline.runtime.cells.one_cell import CellOutcome
    from pipeline.runtime.grid_run import plan, train

    cells = expand(from_mapping(tiny_params))[:2]
    root = tmp_path / "store"
    entries = plan(cells, root, "data", [], "retrain")
    assert [e.action for e in entries] == ["train", "train"]
    # the other driver finishes the first cell now, after this driver's plan
    _cell(files.location(entries[0].folder), contents={"embeddings.parquet": b"z"})

    ran: list[str] = []

    def run(todo, finished):
        out = []
        for entry in todo:
            ran.append(entry.cell.cell_id)
            outcome = CellOutcome(entry.cell.cell_id, "ok")
            finished(entry, outcome)
            out.append(outcome)
        return out

    with Claims(root) as claims:
        trained, reused = train(entries, claims, run, lambda batch: None,
                                lambda e: folders.inspect(e.folder))
        assert not claims.held  # the reused cell's claim was released at once
    assert ran == [cells[1].cell_id]
    assert set(trained) == {cells[1].cell_id} and set(reused) == {cells[0].cell_id}
    assert reused[cells[0].cell_id].status == "ok"


def test_finished_cells_are_logged_in_batches_under_their_claims(tmp_path, tiny_params):
    """The driver hands finished cells to MLflow in batches (grid_run.train's log_batch): every
    cell exactly once, in batches of at most log_batch, the rest at the end of the run; each
    cell's claim is still held while its batch is logged and released right after."""
    from pipeline.config import expand, from_mapping
    from pipeline.runtime.cells.one_cell import CellOutcome
    from pipeline.runtime.grid_run import plan, train

    params = {**tiny_params, "grid": {**tiny_params["grid"], "k": [2, 4, 8, 16], "seed": [0, 1]}}
    cells = expand(from_mapping(params))
    root = tmp_path / "store"
    entries = plan(cells, root, "data", [], "retrain")
    assert len(entries) == 8
    batches: list[list[str]] = []

    def on_done(batch):
        for entry, _ in batch:  # logged before its claim is released
            assert entry.key in claims.held
        batches.append([entry.cell.cell_id for entry, _ in batch])

    def run(todo, finished):
        out = []
        for entry in todo:
            outcome = CellOutcome(entry.cell.cell_id, "ok")
            finished(entry, outcome)
            out.append(outcome)
        return out

    with Claims(root) as claims:
        trained, _ = train(entries, claims, run, on_done, lambda e: folders.inspect(e.folder),
                           log_batch=3, log_seconds=3600.0)
        assert not claims.held
        assert not list((root / "claims").glob("*.json"))  # every claim file removed
    assert [len(b) for b in batches] == [3, 3, 2]
    assert sorted(c for b in batches for c in b) == sorted(c.cell_id for c in cells)

    # a batch is not held back: once the oldest waited log_seconds, the next finish hands it over
    batches.clear()
    entries = plan(cells[:2], tmp_path / "other", "data", [], "retrain")
    with Claims(tmp_path / "other") as claims:
        train(entries, claims, run, on_done, lambda e: folders.inspect(e.folder),
              log_batch=64, log_seconds=0.0)
    assert [len(b) for b in batches] == [1, 1]


def test_a_failing_log_still_releases_the_batchs_claims(tmp_path, tiny_params):
    from pipeline.config import expand, from_mapping
    from pipeline.runtime.cells.one_cell import CellOutcome
    from pipeline.runtime.grid_run import plan, train

    entries = plan(expand(from_mapping(tiny_params)), tmp_path / "store", "data", [], "retrain")

    def run(todo, finished):
        for entry in todo:
            finished(entry, CellOutcome(entry.cell.cell_id, "ok"))
        return []

    def on_done(batch):
        raise RuntimeError("tracking store down")

    with Claims(tmp_path / "store") as claims:
        try:
            train(entries, claims, run, on_done, lambda e: folders.inspect(e.folder))
        except RuntimeError as err:
            assert "tracking store down" in str(err)
        else:
            raise AssertionError("the log's error was swallowed")
        assert not claims.held
