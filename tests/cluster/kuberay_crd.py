"""Make tests/cluster/kuberay-crd-fields.json from KubeRay's CRDs (run by hand, offline after).

    python tests/cluster/kuberay_crd.py <kuberay checkout> [<commit> [<out file>]]

The versioned files (``kuberay-crd-fields-v1.2.0.json``, the oldest operator the manifests
name, and ``-v1.1.1.json``, which must refuse them) were made with ``<commit>`` = "<sha> (<tag>)"
from ``git archive <tag> ray-operator/config/crd/bases`` of the KubeRay repository.

Reads ``ray-operator/config/crd/bases/ray.io_{rayjobs,rayclusters}.yaml`` (the operator's
generated CRDs) and writes the ``v1`` schemas of RayJob and RayCluster as one JSON Schema:
descriptions, printer columns and ``status`` dropped (a manifest sets none of them), and every
subtree that occurs more than once (PodTemplateSpec, Container, Volume …) stored once under
``$defs`` and referenced. What remains is field names, types, enums, required keys and
``x-kubernetes-*`` markers: what ``kubectl apply`` checks a manifest's fields against. The
file names the KubeRay commit it came from. ``RayJob.spec.rayClusterSpec`` is checked to be the
same schema as ``RayCluster.spec`` before writing.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).with_name("kuberay-crd-fields.json")
DROP = {"description", "x-kubernetes-list-map-keys"}
MIN_SHARED = 400  # bytes of JSON: smaller repeated subtrees stay inline


def _v1_schema(crd: dict[str, Any]) -> dict[str, Any]:
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in sorted(node.items()) if k not in DROP}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _key(node: Any) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"))


def _count(node: Any, counts: Counter[str]) -> None:
    if isinstance(node, dict):
        if "properties" in node or "items" in node:
            counts[_key(node)] += 1
        for v in node.values():
            _count(v, counts)
    elif isinstance(node, list):
        for v in node:
            _count(v, counts)


def _hoist(node: Any, shared: dict[str, str], defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        key = _key(node)
        if key in shared:
            name = shared[key]
            if name not in defs:
                defs[name] = None  # reserve first: a subtree may contain itself only by copy
                defs[name] = {k: _hoist(v, shared, defs) for k, v in node.items()}
            return {"$ref": f"#/$defs/{name}"}
        return {k: _hoist(v, shared, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_hoist(v, shared, defs) for v in node]
    return node


def build(repo: Path, commit: str) -> dict[str, Any]:
    crds = repo / "ray-operator" / "config" / "crd" / "bases"
    job = _strip(_v1_schema(yaml.safe_load((crds / "ray.io_rayjobs.yaml").read_text())))
    cluster = _strip(_v1_schema(yaml.safe_load((crds / "ray.io_rayclusters.yaml").read_text())))
    for schema in (job, cluster):
        schema["properties"].pop("status", None)
    if job["properties"]["spec"]["properties"]["rayClusterSpec"] != cluster["properties"]["spec"]:
        raise SystemExit("RayJob.spec.rayClusterSpec differs from RayCluster.spec: check by hand")
    counts: Counter[str] = Counter()
    _count({"job": job, "cluster": cluster}, counts)
    shared = {k: "s" + hashlib.sha256(k.encode()).hexdigest()[:10]
              for k, n in counts.items() if n > 1 and len(k) >= MIN_SHARED}
    defs: dict[str, Any] = {}
    kinds = {"RayJob": _hoist(job, shared, defs), "RayCluster": _hoist(cluster, shared, defs)}
    return {"source": f"github.com/ray-project/kuberay {commit} "
                      "ray-operator/config/crd/bases (Apache-2.0), v1, descriptions and status "
                      "removed, repeated subtrees in $defs; made by tests/cluster/kuberay_crd.py",
            "kinds": kinds, "$defs": dict(sorted(defs.items()))}


def main(argv: list[str]) -> int:
    repo = Path(argv[0])
    commit = argv[1] if len(argv) > 1 else subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
        check=True).stdout.strip()
    out = Path(argv[2]) if len(argv) > 2 else OUT
    out.write_text(json.dumps(build(repo, commit), sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
