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

from cluster import image_tag
from pipeline import __version__
from pipeline.config import ConfigError, load

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
LAUNCHER = CLUSTER / "ray-cluster.yaml"
KUBERAY = CLUSTER / "kuberay-raycluster.yaml"
RAYJOB = CLUSTER / "kuberay-rayjob.yaml"
COMMON = CLUSTER / "kuberay-common.yaml"
SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
CRD_FIELDS = Path(__file__).with_name("kuberay-crd-fields.json")  # master, after v1.7.0
# the oldest operator the manifests name (backoffLimit is new in 1.2) and the one before it
CRD_OLDEST = Path(__file__).with_name("kuberay-crd-fields-v1.2.0.json")
CRD_TOO_OLD = Path(__file__).with_name("kuberay-crd-fields-v1.1.1.json")
PROJECT = "/home/ray/contrastive-bench"
VOLUME = "/mnt/cbench"  # the shared volume in every container: CBENCH_STORE
RAY = ray.__version__
PLACEHOLDER = "IMAGE_TAG"  # cluster/image_tag.py --render fills in the checkout's tag


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
    assert image.rsplit(":", 1)[1] == PLACEHOLDER, image  # ...tagged from the checkout
    assert image_tag.image_tag().startswith(f"{__version__}-ray{RAY}-")
    submitter = rayjob["spec"]["submitterPodTemplate"]["spec"]["containers"]
    assert [c["image"] for c in submitter] == [f"rayproject/ray:{RAY}-py311-cpu"]


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
    assert launcher["file_mounts"] == {}  # code and profiles only from the image (its tag)
    run = " ".join(launcher["docker"]["run_options"])
    # one shared file system, bound into every container and named by CBENCH_STORE there
    assert f"--volume /mnt/efs:{VOLUME}" in run and f"--env CBENCH_STORE={VOLUME}" in run
    init = " ".join(launcher["initialization_commands"])
    assert re.search(r"mount -t nfs4 .* /mnt/efs\)", init)
    assert "chown 1000:100 /mnt/efs" in init  # the image's user owns the volume
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
              for n, t in launcher["available_node_types"].items()
              if n != launcher["head_node_type"]}
    assert len(worker) == 1


# --- KubeRay: the CRD's fields --------------------------------------------------------------------

@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return json.loads(CRD_FIELDS.read_text())


def _strict(node: Any, defs: dict[str, Any]) -> Any:
    """The CRD schema with unknown fields refused (the API server prunes or, strict, rejects
    them)."""
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


@pytest.mark.parametrize("kind,path", [("RayCluster", KUBERAY), ("RayJob", RAYJOB)])
def test_manifests_fit_the_oldest_kuberay_they_name(kind, path):
    oldest = json.loads(CRD_OLDEST.read_text())
    assert "v1.2.0" in oldest["source"]
    _validate(_one(path, kind), kind, oldest)
    for manifest in (KUBERAY, RAYJOB):  # the header names the range the two CRDs check
        assert "operator 1.2.0 or newer" in manifest.read_text()
        assert "v1.2.0 and of master after v1.7.0" in manifest.read_text()


def test_kuberay_1_1_rejects_the_rayjob(rayjob):
    """Why the range starts at 1.2: v1.1's CRD has no spec.backoffLimit."""
    too_old = json.loads(CRD_TOO_OLD.read_text())
    with pytest.raises(jsonschema.ValidationError, match="backoffLimit"):
        _validate(rayjob, "RayJob", too_old)


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

def test_rayjob_runs_the_entrypoint_script_once_and_removes_its_cluster(rayjob, raycluster):
    spec = rayjob["spec"]
    # a script of the image, run from the project folder (the head's working directory): no
    # shell code for KubeRay's and Ray's shells to re-quote (test_rayjob_exit_status.py runs it)
    assert spec["entrypoint"] == "cluster/entrypoint.sh"
    script = ROOT / spec["entrypoint"]
    assert script.stat().st_mode & 0o111 and "exec dvc repro" in script.read_text()
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["submissionMode"] == "K8sJobMode"
    assert spec["backoffLimit"] == 0
    assert rayjob["metadata"]["generateName"]
    submitter = spec["submitterPodTemplate"]["spec"]
    assert submitter["restartPolicy"] == "Never"
    assert all("command" not in c for c in submitter["containers"])  # KubeRay fills it in
    # the same cluster as the interactive RayCluster: one place to read, no drift
    assert spec["rayClusterSpec"] == raycluster["spec"]


@pytest.mark.parametrize("kind,path", [("RayCluster", KUBERAY), ("RayJob", RAYJOB)])
def test_every_pod_has_the_shared_volume_as_its_store(kind, path):
    """CBENCH_STORE is the claim's mount in every container; no manual /dev/shm (KubeRay adds a
    memory-backed one as large as the memory limit; a sizeLimit here would shrink it)."""
    manifest = _one(path, kind)
    spec = manifest["spec"] if kind == "RayCluster" else manifest["spec"]["rayClusterSpec"]
    claim = _one(COMMON, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    account = _one(COMMON, "ServiceAccount")["metadata"]["name"]
    for g in _groups(spec):
        pod = g["template"]["spec"]
        assert pod["serviceAccountName"] == account
        assert pod["securityContext"]["fsGroup"] == 100  # users, the image's ray user's group
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert not any(v.get("emptyDir", {}).get("medium") == "Memory" for v in volumes.values())
        for c in _containers(g):
            assert c["workingDir"] == PROJECT
            assert c["resources"]["limits"]["memory"]  # KubeRay sizes /dev/shm from it
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            assert "/dev/shm" not in mounts
            assert volumes[mounts[VOLUME]["name"]]["persistentVolumeClaim"]["claimName"] == \
                claim["metadata"]["name"]
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["CBENCH_STORE"] == VOLUME
    head = spec["headGroupSpec"]["template"]["spec"]
    owner = head["initContainers"][0]  # NFS volumes ignore fsGroup: chown, as root
    assert owner["command"] == ["chown", "1000:100", VOLUME]
    assert owner["securityContext"]["runAsUser"] == 0
    secret = head["containers"][0]["envFrom"][0]["secretRef"]  # MLflow's URI and credentials
    assert secret == {"name": "contrastive-bench-mlflow", "optional": True}
    assert "contrastive-bench-mlflow" in COMMON.read_text()  # how to create it


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
                   "python cluster/image_tag.py --render cluster/kuberay-rayjob.yaml | "
                   "kubectl create -f -", "kuberay-common.yaml", "IamInstanceProfile",
                   "docker build", "## Where every piece of state lives",
                   "CBENCH_STORE=/mnt/cbench",
                   "$CBENCH_STORE/workspace", "MLFLOW_TRACKING_URI", "contrastive-bench-mlflow",
                   "cluster/entrypoint.sh", "operator **1.2.0 or newer**", "CBENCH_STORE_SHARED=1",
                   "tests/cluster/test_simulated_cluster.py",
                   "tests/cluster/test_rayjob_exit_status.py"):
        assert needle in text, needle


def test_cluster_profile_is_valid_params_with_the_volume_as_store(monkeypatch):
    monkeypatch.setenv("CBENCH_STORE", VOLUME)  # as every pod and node sets it
    monkeypatch.delenv("CBENCH_STORE_SHARED", raising=False)
    params = load(ROOT / "params.yaml", CLUSTER / "params.cluster.yaml")
    c = params.compute
    assert c.ray_address == "auto" and c.storage is None  # null: $CBENCH_STORE
    assert 0 < c.num_gpus < 1  # several cells share a GPU
    assert params.train.threads == c.num_cpus
    assert params.tracking.uri == "sqlite:///mlruns.db"  # in the workspace on the volume,
    # unless the Secret sets MLFLOW_TRACKING_URI (a server)
    monkeypatch.delenv("CBENCH_STORE")  # a pod without it would write into its own home
    with pytest.raises(ConfigError, match=r"compute.storage = None: a cluster run"):
        load(ROOT / "params.yaml", CLUSTER / "params.cluster.yaml")


# --- the image tag names the code -----------------------------------------------------------------

def _tagged_copy(tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "checkout"
    for name in image_tag.CODE:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, copy / name)
    return copy


def test_the_tag_changes_with_the_code_and_not_with_the_rest(tmp_path):
    copy = _tagged_copy(tmp_path)
    tag = image_tag.image_tag(copy)
    assert tag == image_tag.image_tag()  # the copy holds this checkout's code
    (copy / "README.md").write_text("docs are not code")
    assert image_tag.image_tag(copy) == tag
    loss = copy / "pipeline" / "losses" / "infonce.py"
    loss.write_text(loss.read_text() + "\n# a change of code, no version bump\n")
    assert image_tag.image_tag(copy) != tag


def test_rendered_manifests_carry_the_checkouts_tag_and_others_are_refused(tmp_path, capsys):
    tag = image_tag.image_tag()
    for path in (LAUNCHER, KUBERAY, RAYJOB):
        assert image_tag.main(["--render", str(path)]) == 0
        rendered = tmp_path / path.name
        rendered.write_text(capsys.readouterr().out)
        assert PLACEHOLDER not in re.sub(r"\w+IMAGE_TAG", "", rendered.read_text())
        assert image_tag.main(["--check", str(rendered)]) == 0
        other = tmp_path / f"other-{path.name}"
        other.write_text(rendered.read_text().replace(tag, f"{__version__}-ray{RAY}-0123456789ab"))
        assert image_tag.main(["--check", str(other)]) == 1
        assert "is not this checkout's" in capsys.readouterr().err
    assert image_tag.main(["--check", str(RAYJOB)]) == 1  # the placeholder itself is no tag
    assert image_tag.main(["--expect", tag]) == 0
    assert image_tag.main(["--expect", f"{__version__}-ray{RAY}-0123456789ab"]) == 1
    assert "does not name this code" in capsys.readouterr().err
