"""The RayJob's exit status through the real chain: a failed stage makes the Ray job FAILED.

A Ray head with its dashboard on 127.0.0.1 is started in a project folder, as KubeRay starts the
head pod in the image's; the manifest's exact ``spec.entrypoint`` is submitted the way KubeRay's
submitter does (one ``bash -ce`` line: ``ray job submit --no-wait … -- <entrypoint>``, then
``ray job logs --follow``), and the job's status is read from the dashboard, where KubeRay reads
it. The project is a tiny one (a single always-changed stage that exits with a status the test
chooses); the entrypoint script is the real one, copied from cluster/ like the image's.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tests.cluster.ray_nodes import Cluster, manifest_entrypoint
from tests.conftest import ROOT, venv_env

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _project(path: Path) -> Path:
    """The image's folder layout, with one stage: exit with the status in ``wanted``."""
    (path / "cluster").mkdir(parents=True)
    shutil.copy2(ROOT / "cluster" / "entrypoint.sh", path / "cluster" / "entrypoint.sh")
    for name in ("pipeline", "stages", "profiles"):
        (path / name).mkdir()
    (path / "stages" / "check.py").write_text(
        "import pathlib, sys\nsys.exit(int(pathlib.Path(sys.argv[1]).read_text()))\n")
    (path / "dvc.yaml").write_text(textwrap.dedent(f"""\
        stages:
          check:
            cmd: python stages/check.py {path / 'wanted'}
            always_changed: true
        """))
    (path / "params.yaml").write_text("{}\n")
    return path


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    root = tmp_path_factory.mktemp("rayjob")
    image = _project(root / "image")
    env = venv_env(root / "volume")  # CBENCH_STORE: the shared volume, as on every pod
    cluster = Cluster(root, image, env, workers=0)
    try:
        yield cluster.start()
    finally:
        cluster.close()


@pytest.mark.parametrize("wanted,status", [(3, "FAILED"), (0, "SUCCEEDED")])
def test_the_manifests_entrypoint_fails_the_job_when_a_stage_fails(head, wanted, status):
    entrypoint = manifest_entrypoint(ROOT / "cluster" / "kuberay-rayjob.yaml")
    (head.image / "wanted").write_text(str(wanted))
    job = f"check-{wanted}"
    submitter = head.submit(entrypoint, job)
    out, _ = submitter.communicate(timeout=600)
    assert head.wait(job) == status, out + head.logs(job)
    logs = head.logs(job)
    assert f"Running entrypoint for job {job}: {entrypoint}" in logs  # the exact string ran
    assert "entrypoint: dvc repro in" in logs
    workspace = Path(venv_env(head.root / "volume")["CBENCH_STORE"]) / "workspace"
    assert (workspace / "dvc.yaml").exists() and (workspace / ".dvc" / "config").exists()
    if wanted:
        assert "failed to reproduce 'check'" in logs
