"""The cluster configs (cluster/) validate offline; no cluster is started, no network is used.

Launcher: Ray's bundled JSON schema, then Ray's own prepare/validate (what `ray up` checks before
calling the cloud). KubeRay: every field of the RayCluster and RayJob manifests against the
fields of KubeRay's CRD schemas (tests/cluster/kuberay-crd-fields.json, made from the operator's
CRDs by tests/cluster/kuberay_crd.py), plus Ray's KubeRay autoscaler parser. One Ray version
across pyproject.toml, the Dockerfile, the launcher's image and the manifests.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray.autoscaler
import yaml

from pipeline import __version__
from pipeline.config import load

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
LAUNCHER = CLUSTER / "ray-cluster.yaml"
KUBERAY = CLUSTER / "kuberay-raycluster.yaml"
RAYJOB = CLUSTER / "kuberay-rayjob.yaml"
COMMON = CLUSTER / "kuberay-common.yaml"
SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
CRD_FIELDS = Path(__file__).with_name("kuberay-crd-fields.json")
PROJECT = "/home/ray/contrastive-bench"
RAY = ray.__version__
IMAGE_TAG = f"{__version__}-ray{RAY}"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _one(path: Path, kind: str) -> dict[str, Any]:
    found = [d for d in _docs(path) if d.get("kind") == kind]
    assert len(found) == 1, (path, kind)
    return found[0]


@pytest.fixture(scope="module")
def launcher() -> dict[str, Any]:
    return yaml.safe_load(LAUNCHER.read_text())


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())


@pytest.fixture(scope="module")
def raycluster() -> dict[str, Any]:
    return _one(KUBERAY, "RayCluster")


@pytest.fixture(scope="module")
def rayjob() -> dict[str, Any]:
    return _one(RAYJOB, "RayJob")


# --- one Ray version --------------------------------------------------------------------------

def test_one_pinned_ray_version_everywhere(launcher, raycluster, rayjob):
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if re.match(r"ray(\[[^]]*\])?\s*[=<>~!]", d)]
    assert pins == [f"ray[default]=={RAY}"], pins  # exactly the installed Ray, pinned
    docker = (CLUSTER / "Dockerfile").read_text()
    assert re.search(rf"^ARG RAY_VERSION={re.escape(RAY)}$", docker, re.M)
    assert "FROM rayproject/ray:${RAY_VERSION}-py311-gpu" in docker
    assert "ray.__version__ != '${RAY_VERSION}'" in docker  # the build fails on another Ray
    for cr_spec in (raycluster["spec"], rayjob["spec"]["rayClusterSpec"]):
        assert cr_spec["rayVersion"] == RAY
    images = {launcher["docker"]["image"]} | _images(raycluster["spec"]) | \
        _images(rayjob["spec"]["rayClusterSpec"])
    assert len(images) == 1, images  # every node runs one image...
    image = images.pop()
    assert image.rsplit(":", 1)[1] == IMAGE_TAG, image  # ...tagged with this project and Ray


def _groups(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec["headGroupSpec"], *spec["workerGroupSpecs"]]


def _containers(group: dict[str, Any]) -> list[dict[str, Any]]:
    return group["template"]["spec"]["containers"]


def _images(spec: dict[str, Any]) -> set[str]:
    return {c["image"] for g in _groups(spec) for c in _containers(g)}


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
    bad = copy.deepcopy(launcher)
    bad["docker"]["shm_size"] = "8g"
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


def test_launcher_runs_the_image_and_installs_nothing(launcher):
    assert launcher["docker"]["pull_before_run"] is True
    for key in ("setup_commands", "head_setup_commands", "worker_setup_commands"):
        assert launcher[key] == [], key
    text = LAUNCHER.read_text()
    assert "pip install" not in text and "make " not in text
    assert set(launcher["file_mounts"]) == {f"{PROJECT}/profiles"}  # code only from the image
    run = " ".join(launcher["docker"]["run_options"])
    for folder in ("data", "reports"):  # one shared file system, bound into every container
        assert f"--volume /mnt/efs/{folder}:{PROJECT}/{folder}" in run
    init = " ".join(launcher["initialization_commands"])
    assert re.search(r"mount -t nfs4 .* /mnt/efs\)", init)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in launcher[key] if "ray start" in c]
        assert start and all(c.startswith(f"cd {PROJECT} && ") for c in start), key
    head = " ".join(launcher["head_start_ray_commands"])
    assert "--num-cpus=0" in head and "--dashboard-host=127.0.0.1" in head


def test_workers_have_an_instance_profile_for_object_storage(launcher):
    for name, t in launcher["available_node_types"].items():
        arn = t["node_config"]["IamInstanceProfile"]["Arn"]
        assert re.fullmatch(r"arn:aws:iam::\w+:instance-profile/[\w+=,.@-]+", arn), (name, arn)
    worker = {t["node_config"]["IamInstanceProfile"]["Arn"]
              for n, t in launcher["available_node_types"].items() if n != launcher["head_node_type"]}
    assert len(worker) == 1


# --- KubeRay: the CRD's fields ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return json.loads(CRD_FIELDS.read_text())


def _strict(node: Any, defs: dict[str, Any]) -> Any:
    """The CRD schema with unknown fields refused (the API server prunes or, strict, rejects them)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _strict(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        out = {k: _strict(v, defs) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out and \
                not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v, defs) for v in node]
    return node


def _validate(manifest: dict[str, Any], kind: str, crd: dict[str, Any]) -> None:
    schema = _strict(crd["kinds"][kind], crd["$defs"])
    jsonschema.validate(manifest, schema)


@pytest.mark.parametrize("kind,path", [("RayCluster", KUBERAY), ("RayJob", RAYJOB)])
def test_manifests_use_only_fields_of_the_kuberay_crd(kind, path, crd):
    manifest = _one(path, kind)
    assert manifest["apiVersion"] == "ray.io/v1"
    _validate(manifest, kind, crd)


def test_crd_field_check_is_not_vacuous(raycluster, rayjob, crd):
    """A misspelt or misplaced field, a wrong type, an unknown enum value: each is refused."""
    bad = copy.deepcopy(rayjob)
    bad["spec"]["shutdownAfterJobFinish"] = True  # missing the s
    with pytest.raises(jsonschema.ValidationError, match="shutdownAfterJobFinish"):
        _validate(bad, "RayJob", crd)
    bad = copy.deepcopy(raycluster)
    _containers(bad["spec"]["workerGroupSpecs"][0])[0]["volumeMount"] = []
    with pytest.raises(jsonschema.ValidationError, match="volumeMount"):
        _validate(bad, "RayCluster", crd)
    bad = copy.deepcopy(raycluster)
    bad["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0  # map[string]string
    with pytest.raises(jsonschema.ValidationError):
        _validate(bad, "RayCluster", crd)
    bad = copy.deepcopy(rayjob)
    bad["spec"]["rayClusterSpec"]["autoscalerOptions"]["upscalingMode"] = "Fast"
    with pytest.raises(jsonschema.ValidationError, match="Fast"):
        _validate(bad, "RayJob", crd)
    bad = copy.deepcopy(rayjob)
    bad["spec"]["ttlSecondsAfterFinished"] = "300"
    with pytest.raises(jsonschema.ValidationError):
        _validate(bad, "RayJob", crd)
    assert crd["source"].startswith("github.com/ray-project/kuberay ")


# --- KubeRay: what the manifests must say ---------------------------------------------------------

def test_rayjob_runs_the_pipeline_once_and_removes_its_cluster(rayjob, raycluster):
    spec = rayjob["spec"]
    assert re.search(r"\bdvc repro\b", spec["entrypoint"])
    assert f"cd {PROJECT} &&" in spec["entrypoint"]
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["submissionMode"] == "K8sJobMode"
    assert rayjob["metadata"]["generateName"]
    # the same cluster as the interactive RayCluster: one place to read, no drift
    assert spec["rayClusterSpec"] == raycluster["spec"]


@pytest.mark.parametrize("kind,path", [("RayCluster", KUBERAY), ("RayJob", RAYJOB)])
def test_every_pod_shares_data_and_has_a_memory_backed_dev_shm(kind, path):
    manifest = _one(path, kind)
    spec = manifest["spec"] if kind == "RayCluster" else manifest["spec"]["rayClusterSpec"]
    claim = _one(COMMON, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    account = _one(COMMON, "ServiceAccount")["metadata"]["name"]
    for g in _groups(spec):
        pod = g["template"]["spec"]
        assert pod["serviceAccountName"] == account
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in _containers(g):
            assert c["workingDir"] == PROJECT
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            data = mounts[f"{PROJECT}/data"]
            assert volumes[data["name"]]["persistentVolumeClaim"]["claimName"] == \
                claim["metadata"]["name"]
            shm = volumes[mounts["/dev/shm"]["name"]]["emptyDir"]
            assert shm["medium"] == "Memory" and shm["sizeLimit"]
    head = _containers(spec["headGroupSpec"])[0]
    assert f"{PROJECT}/reports" in {m["mountPath"] for m in head["volumeMounts"]}


def test_raycluster_head_and_gpu_workers(raycluster):
    spec = raycluster["spec"]
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    gpu_groups = 0
    for group in spec["workerGroupSpecs"]:
        assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        for c in _containers(group):
            limits = c["resources"]["limits"]
            if int(limits.get("nvidia.com/gpu", 0)) > 1:
                gpu_groups += 1
                assert c["resources"]["requests"]["nvidia.com/gpu"] == limits["nvidia.com/gpu"]
    assert gpu_groups >= 1, "no worker group with several nvidia.com/gpu"


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

def test_readme_explains_address_storage_tracking_and_the_rayjob():
    text = (CLUSTER / "README.md").read_text()
    for needle in ("compute.ray_address", "RAY_ADDRESS", "compute.num_cpus", "compute.num_gpus",
                   "pyarrow.fs", "s3://", "tracking.uri", "mlflow server", "ray up",
                   "ray-cluster.yaml", "kuberay-raycluster.yaml", "ray down", "compute.storage",
                   "kuberay-rayjob.yaml", "kubectl create -f cluster/kuberay-rayjob.yaml",
                   "kuberay-common.yaml", "IamInstanceProfile", "docker build"):
        assert needle in text, needle


def test_cluster_profile_is_valid_params():
    params = load(ROOT / "params.yaml", CLUSTER / "params.cluster.yaml")
    c = params.compute
    assert c.ray_address == "auto"
    assert 0 < c.num_gpus < 1  # several cells share a GPU
    assert params.train.threads == c.num_cpus
    assert params.tracking.uri.startswith("http")
