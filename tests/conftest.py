"""Shared fixtures: tiny params, and a throw-away project folder for end-to-end runs."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from pipeline.config import merge, read_yaml
from pipeline.datasets.augment import AUGMENTATIONS
from pipeline.datasets.registry import DATASETS
from pipeline.encoders.registry import ENCODERS
from pipeline.losses.registry import LOSSES
from pipeline.losses.schedules import SCHEDULES
from pipeline.plugins import FILE_MODULE_PREFIX

ROOT = Path(__file__).resolve().parents[1]
THREADS_ENV = "CBENCH_TEST_THREADS"
_TRACKED = pytest.StashKey[dict[str, str] | None]()


def pytest_configure(config: pytest.Config) -> None:
    """``CBENCH_TEST_THREADS=n``: run every test with n torch intra-op threads.

    ``.ci/run`` runs the numerical tests a second time with another thread count than the
    default, so a comparison that only holds for one reduction order fails in CI (STYLE.md §15).
    """
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(f"{THREADS_ENV} = {value!r}: expected an integer >= 1 "
                                "(torch threads)")
    import torch

    torch.set_num_threads(int(value))


def tracked_state(root: Path = ROOT) -> dict[str, str] | None:
    """Each tracked file of the checkout at ``root`` that differs from HEAD, with a digest of
    its content (None outside a git checkout): what a test run must leave as it found it."""
    import hashlib

    try:
        out = subprocess.run(["git", "-C", str(root), "diff", "--name-only", "HEAD"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    state = {}
    for name in out.splitlines():
        path = root / name
        state[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "gone"
    return state


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The files whose state (:func:`tracked_state`) differs between two moments."""
    return sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        session.config.stash[_TRACKED] = tracked_state()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test changed a tracked file of the checkout (a screenshot written
    into docs/, a rewritten dvc.lock): outputs belong in tmp_path; docs come from `make docs`."""
    before = session.config.stash.get(_TRACKED, None)
    if hasattr(session.config, "workerinput") or before is None:
        return
    changed = changed_files(before, tracked_state() or {})
    if os.environ.get("CBENCH_DOCS_SHOTS") == "1":  # `make docs` writes the screenshots
        changed = [n for n in changed if not n.startswith("docs/")]
    if changed:
        session.config.get_terminal_writer().line(
            f"the test run changed tracked files of the checkout: {', '.join(changed)} "
            "(tests write into tmp_path; `make docs` regenerates the screenshots in docs/)",
            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_report_header(config: pytest.Config) -> str:
    import torch

    source = f"{THREADS_ENV}" if os.environ.get(THREADS_ENV, "").strip() else "default"
    return f"torch intra-op threads: {torch.get_num_threads()} ({source})"

# Ray reads its single-machine switch once, when it is imported, and test modules import ray
# before the pipeline does: set it here, first, so that every local Ray instance and simulated
# cluster of the tests binds 127.0.0.1 (pipeline/runtime/backends/executor.py explains the switch).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# The stages the tests start run cold: each test's own environment (a store, a profile) would
# start a warm server of its own (pipeline/runtime/warm.py), hundreds of MB idling for minutes.
# tests/runtime/test_warm.py runs them warm; CBENCH_WARM=on runs the whole suite so.
os.environ.setdefault("CBENCH_WARM", "off")

TINY: dict[str, Any] = {
    "data": {"name": "laplace", "n_train": 600, "n_heldout": 200, "seed": 0,
             "options": {"input_dim": 16}},
    "grid": {"objective": ["contrastive"], "loss": ["infonce"], "k": [4, 8], "tau": [0.5],
             "tau_schedule": ["constant"], "n": [256], "arch": ["linear"], "embed_dim": [8],
             "batch_size": [64], "seed": [0]},
    "train": {"epochs": 2},
    "stats": {"block_cols": 4, "n_workers": 1, "projections": 4, "bootstrap": 10, "epochs": [0],
              "null_draws": 1},
    "search": {"k_eval": 16, "anchors": 50, "positives": 4, "k_sweep": [2, 4, 8], "fit_k_min": 4},
    "bounds": {"tuples": 200},
}


REGISTRIES = (LOSSES, SCHEDULES, DATASETS, ENCODERS, AUGMENTATIONS)


@pytest.fixture(autouse=True)
def _registries_restored():
    """Each test leaves the registries as it found them: a plugin a test loads (params.plugins)
    registers its entries in this process, and they would otherwise reach every later test (the
    committed schema's enums, for one). A plugin file's module goes too, so that the next test
    that names it imports it again."""
    saved, modules = [dict(r) for r in REGISTRIES], set(sys.modules)
    yield
    for registry, entries in zip(REGISTRIES, saved, strict=True):
        registry.clear()
        registry.update(entries)
    for name in set(sys.modules) - modules:
        if name.startswith(FILE_MODULE_PREFIX):
            del sys.modules[name]


@pytest.fixture(autouse=True)
def _tracking_uri_unset(monkeypatch):
    """No test sees another's MLflow server: ``$MLFLOW_TRACKING_URI`` names the server the
    pipeline logs to (pipeline/runtime/tracking/runs.py), and ``mlflow.set_tracking_uri`` sets it in
    the environment, so one test reading its own database would send every later in-process
    tracker and subprocess pipeline there."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield
    if "mlflow" in sys.modules:
        sys.modules["mlflow"].set_tracking_uri(None)  # also unsets the environment variable


def mlflow_runs(db: Path) -> pd.DataFrame:
    """Every run of the contrastive-bench experiment in the SQLite database ``db``, one row each
    (``status``, ``tags.*``, ``metrics.*``, ``params.*``, as ``mlflow.search_runs`` names them);
    read through a client of its own, so the process's tracking URI stays unset."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("contrastive-bench")
    runs = client.search_runs([experiment.experiment_id], max_results=50_000) if experiment else []
    rows = [{"run_id": r.info.run_id, "status": r.info.status,
             **{f"tags.{k}": v for k, v in r.data.tags.items()},
             **{f"metrics.{k}": v for k, v in r.data.metrics.items()},
             **{f"params.{k}": v for k, v in r.data.params.items()}} for r in runs]
    return pd.DataFrame(rows, columns=None if rows else ["run_id", "status", "tags.cell_id"])


def cell_runs(db: Path) -> pd.DataFrame:
    """The runs of cells (tagged ``cell_id``) in ``db``."""
    runs = mlflow_runs(db)
    if "tags.cell_id" not in runs:
        return runs.iloc[0:0].assign(**{"tags.cell_id": []})
    return runs[runs["tags.cell_id"].notna()]


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed generator for tests that draw random data (pyproject puts the root on sys.path,
    so ``tests.oracles`` imports everywhere)."""
    return np.random.default_rng(20260607)


@pytest.fixture
def tiny_params() -> dict[str, Any]:
    """The repo's params.yaml with a tiny grid laid over it (every key present)."""
    return merge(read_yaml(ROOT / "params.yaml"), copy.deepcopy(TINY))


def venv_env(store: Path | None = None) -> dict[str, str]:
    """The environment for subprocesses: this interpreter's bin first, so `python` and `dvc`
    resolve; ``store``: the cell store (CBENCH_STORE) of a test's project."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for key in ("CBENCH_PROFILE", "RAY_ADDRESS", "DVC_ROOT", "CBENCH_STORE", "MLFLOW_TRACKING_URI"):
        env.pop(key, None)
    if store is not None:
        env["CBENCH_STORE"] = str(store)
    return env


class Project:
    """A temporary copy of the pipeline definition with its own params, data, cell store and
    MLflow database."""

    def __init__(self, path: Path, store: Path | None = None):
        self.path = path
        self.store = store or path.parent / f"{path.name}-store"

    @property
    def cells(self) -> Path:
        return self.store / "cells"

    def write_params(self, params: dict[str, Any]) -> None:
        (self.path / "params.yaml").write_text(yaml.safe_dump(params))

    def run(self, *args: str, check: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(args), cwd=self.path, env=venv_env(self.store),
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}"
                                 f"\nstderr:\n{proc.stderr[-4000:]}")
        return proc

    def repro(self, *targets: str, **kw: Any) -> subprocess.CompletedProcess:
        """``dvc repro``: the whole DAG, or ``targets`` and what they depend on (``"train"``:
        resolve, prepare, train), for a test whose assertions need no later stage."""
        return self.run(str(Path(sys.executable).parent / "dvc"), "repro", *targets, **kw)


@pytest.fixture
def project(tmp_path: Path, tiny_params: dict[str, Any]) -> Project:
    path = tmp_path / "project"
    copy_project(path)
    proj = Project(path)
    proj.write_params(tiny_params)
    proj.run(str(Path(sys.executable).parent / "dvc"), "init", "--no-scm", "-q")
    proj.run(str(Path(sys.executable).parent / "dvc"), "config", "core.analytics", "false")
    shutil.copytree(ROOT / ".dvc" / "plots", path / ".dvc" / "plots", dirs_exist_ok=True)
    return proj


def copy_project(path: Path) -> None:
    """What a run needs: dvc.yaml, the code its deps point at (so the hashes are real), params."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", "params.yaml", "params.schema.json", ".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, path / name)
    for name in ("pipeline", "stages", "profiles", "suites"):
        shutil.copytree(ROOT / name, path / name, ignore=shutil.ignore_patterns("__pycache__"))


@pytest.fixture
def capture(monkeypatch):
    """``capture(module)``: the figures the module passes to its ``save``, in order (they stay
    inspectable after ``save`` closes them)."""

    def start(module):
        figs = []
        real = module.save

        def save(fig):
            figs.append(fig)
            return real(fig)

        monkeypatch.setattr(module, "save", save)
        return figs

    return start


def assert_drawn_png(path: Path) -> None:
    """A PNG that is not blank: some ink (non-white pixels), and more than a few colours."""
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(path)[..., :3]
    ink = (pixels < 0.8).any(axis=-1).mean()
    assert 0.005 < ink < 0.9, ink
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10  # lines, text and colours drawn
