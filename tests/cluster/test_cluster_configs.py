"""The cluster configs (cluster/) validate offline; no cluster is started, no network is used.

Launcher: Ray's bundled JSON schema, then Ray's own prepare/validate (what `ray up` checks before
calling the cloud). KubeRay: no CRD schema offline, so structural checks plus Ray's KubeRay
autoscaler parser, which derives and validates the node types from the RayCluster object.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray.autoscaler
import yaml

from pipeline.config import load

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
LAUNCHER = CLUSTER / "ray-cluster.yaml"
KUBERAY = CLUSTER / "kuberay-raycluster.yaml"
SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
PROJECT = "/home/ubuntu/contrastive-bench"


@pytest.fixture(scope="module")
def launcher() -> dict[str, Any]:
    return yaml.safe_load(LAUNCHER.read_text())


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())


@pytest.fixture(scope="module")
def raycluster() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(KUBERAY.read_text()) if d]
    found = [d for d in docs if d.get("kind") == "RayCluster"]
    assert len(found) == 1
    return found[0]


# --- launcher ----------------------------------------------------------------------------------

def test_launcher_validates_against_rays_bundled_schema(launcher, schema):
    jsonschema.validate(launcher, schema)


def test_schema_check_is_not_vacuous(launcher, schema):
    """The schema rejects what `ray up` rejects: fractional resources, unknown keys."""
    bad = copy.deepcopy(launcher)
    bad["available_node_types"]["gpu_4x_a10g"]["resources"]["GPU"] = 0.5
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = copy.deepcopy(launcher)
    bad["available_node_types"]["head"]["instance_type"] = "m6i.2xlarge"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_launcher_passes_rays_own_prepare_and_validate(launcher):
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(launcher))  # AWS defaults merged, offline
    validate_config(prepared)
    assert prepared["provider"]["type"] == "aws"
    assert prepared["head_node_type"] == "head"


def test_launcher_has_multi_gpu_workers_and_a_cpu_only_head(launcher):
    types = launcher["available_node_types"]
    assert types[launcher["head_node_type"]]["resources"] == {"CPU": 0}
    gpu = {name: t for name, t in types.items() if t["resources"].get("GPU", 0) > 1}
    assert gpu, "no multi-GPU worker type"
    for t in gpu.values():
        assert t["node_config"]["InstanceType"].startswith(("g5.", "g6.", "p4", "p5"))
        assert t["max_workers"] >= 1 and t.get("min_workers", 0) == 0
    assert launcher["max_workers"] >= max(t["max_workers"] for t in gpu.values())


def test_launcher_installs_the_project_and_starts_ray_in_it(launcher):
    assert launcher["file_mounts"] == {PROJECT: "."}
    setup = " ".join(launcher["setup_commands"])
    assert f"make -C {PROJECT} .venv/.installed" in setup  # the project's own install
    assert re.search(rf"mount -t nfs4 .* {PROJECT}/data", setup)  # shared data/ on every node
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in launcher[key] if "ray start" in c]
        assert start and all(c.startswith(f"cd {PROJECT} && ") and ".venv/bin/ray start" in c
                             for c in start), key
    head = " ".join(launcher["head_start_ray_commands"])
    assert "--num-cpus=0" in head and "--dashboard-host=127.0.0.1" in head
    for excluded in (".venv", "data", "mlruns.db"):
        assert excluded in launcher["rsync_exclude"]


# --- KubeRay ------------------------------------------------------------------------------------

def _containers(group: dict[str, Any]) -> list[dict[str, Any]]:
    return group["template"]["spec"]["containers"]


def test_raycluster_structure(raycluster):
    assert raycluster["apiVersion"] == "ray.io/v1"
    assert raycluster["kind"] == "RayCluster"
    spec = raycluster["spec"]
    assert spec["rayVersion"] == ray.__version__
    head = spec["headGroupSpec"]
    assert isinstance(head["rayStartParams"], dict)
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert all(isinstance(v, str) for v in head["rayStartParams"].values())  # map[string]string
    workers = spec["workerGroupSpecs"]
    assert workers
    gpu_groups = 0
    for group in workers:
        assert group["groupName"] and isinstance(group["rayStartParams"], dict)
        assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        for c in _containers(group):
            limits = c["resources"]["limits"]
            if int(limits.get("nvidia.com/gpu", 0)) > 1:
                gpu_groups += 1
                assert c["resources"]["requests"]["nvidia.com/gpu"] == limits["nvidia.com/gpu"]
    assert gpu_groups >= 1, "no worker group with several nvidia.com/gpu"


def test_raycluster_images_are_pinned_and_share_data(raycluster):
    spec = raycluster["spec"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    images = {c["image"] for g in groups for c in _containers(g)}
    assert len(images) == 1
    image = images.pop()
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    assert re.fullmatch(r"\d+\.\d+\.\d+", tag) or "@sha256:" in image, image
    for g in groups:
        volumes = {v["name"]: v for v in g["template"]["spec"]["volumes"]}
        for c in _containers(g):
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            data = mounts[c["workingDir"] + "/data"]
            assert volumes[data]["persistentVolumeClaim"]["claimName"] == "contrastive-bench-data"
    claim = next(d for d in yaml.safe_load_all(KUBERAY.read_text())
                 if d and d["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_dockerfile_base_is_pinned_to_this_ray():
    text = (CLUSTER / "Dockerfile").read_text()
    assert f"FROM rayproject/ray:{ray.__version__}-py311-gpu" in text


def test_raycluster_through_rays_kuberay_autoscaler_parser(raycluster):
    """The autoscaler sidecar's own conversion; it runs validate_config on the result."""
    from ray.autoscaler._private.kuberay.autoscaling_config import (
        _derive_autoscaling_config_from_ray_cr,
    )

    cr = copy.deepcopy(raycluster)
    cr["metadata"].setdefault("namespace", "default")
    config = _derive_autoscaling_config_from_ray_cr(cr)
    types = config["available_node_types"]
    assert types["headgroup"]["resources"]["CPU"] == 0
    gpu = types["gpu-4x"]
    assert gpu["resources"]["GPU"] == 4 and gpu["resources"]["CPU"] >= 8
    assert gpu["max_workers"] >= 1


# --- README and profile ---------------------------------------------------------------------------

def test_readme_explains_address_storage_and_tracking():
    text = (CLUSTER / "README.md").read_text()
    for needle in ("compute.ray_address", "RAY_ADDRESS", "compute.num_cpus", "compute.num_gpus",
                   "pyarrow.fs", "s3://", "tracking.uri", "mlflow server", "ray up",
                   "ray-cluster.yaml", "kuberay-raycluster.yaml", "ray down", "compute.storage"):
        assert needle in text, needle


def test_cluster_profile_is_valid_params():
    params = load(ROOT / "params.yaml", CLUSTER / "params.cluster.yaml")
    c = params.compute
    assert c.ray_address == "auto"
    assert 0 < c.num_gpus < 1  # several cells share a GPU
    assert params.train.threads == c.num_cpus
    assert params.tracking.uri.startswith("http")
