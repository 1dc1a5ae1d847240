"""A simulated multi-node Ray cluster on 127.0.0.1, started the way KubeRay starts pods.

Each node is one ``ray start --block`` process (its own process group) with its own ``HOME``,
``TMPDIR`` and Ray temporary folder: its "local disk". Every node gets the same environment a
pod of the manifests gets (``CBENCH_STORE`` on the shared volume, the image's project folder as
working directory and on ``PYTHONPATH``, as the editable install puts it in the image). Jobs
are submitted as KubeRay's submitter does: one ``bash -ce`` command line with the manifest's
entrypoint pasted in (ray-operator/controllers/ray/common/job.go, ``BuildJobSubmitCommand``).
Every port is a free one of 127.0.0.1; ``close`` ends only the process groups started here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manifest_entrypoint(rayjob: Path) -> str:
    """``spec.entrypoint`` of the RayJob manifest, as KubeRay reads it (trimmed)."""
    docs = [d for d in yaml.safe_load_all(rayjob.read_text()) if d and d.get("kind") == "RayJob"]
    return str(docs[0]["spec"]["entrypoint"]).strip()


@dataclass
class Node:
    name: str
    home: Path
    tmp: Path
    ray_tmp: Path
    proc: subprocess.Popen | None = None

    def local_files(self) -> list[Path]:
        """Every file under this node's HOME and TMPDIR."""
        return sorted(p for root in (self.home, self.tmp) for p in root.rglob("*") if p.is_file())


@dataclass
class Cluster:
    """``workers`` one-CPU nodes and a head without CPUs (it runs the driver only)."""

    root: Path
    image: Path
    env: dict[str, str]
    workers: int = 2
    nodes: list[Node] = field(default_factory=list)
    dashboard: str = ""

    def _node(self, name: str) -> Node:
        home, tmp = self.root / name / "home", self.root / name / "tmp"
        home.mkdir(parents=True)
        tmp.mkdir()
        # Ray's own session folder (sockets: a short path) is Ray's, not the pipeline's
        ray_tmp = Path(tempfile.mkdtemp(prefix=f"cb{name[:2]}", dir="/tmp"))
        return Node(name, home, tmp, ray_tmp)

    def _start(self, node: Node, args: list[str]) -> None:
        """The head: ``ray start --head`` with Ray's single-machine switch, so every process of
        it binds 127.0.0.1 (as the pipeline's own local instances do). A worker node:
        ray_worker_node.py (``args``: the head's GCS address and the CPUs), see there why."""
        env = {**self.env, "HOME": str(node.home), "TMPDIR": str(node.tmp),
               "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        if args[0] == "--head":
            command = [str(BIN / "ray"), "start", "--block", "--node-ip-address=127.0.0.1",
                       f"--temp-dir={node.ray_tmp}", "--object-store-memory=150000000",
                       f"--dashboard-agent-listen-port={free_port()}",
                       f"--metrics-export-port={free_port()}",
                       f"--runtime-env-agent-port={free_port()}", "--disable-usage-stats", *args]
        else:
            command = [sys.executable, str(Path(__file__).with_name("ray_worker_node.py")),
                       *args, str(node.ray_tmp), *(str(free_port()) for _ in range(3))]
        log = (self.root / f"{node.name}.log").open("a")
        node.proc = subprocess.Popen(command, cwd=self.image, env=env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if node not in self.nodes:
            self.nodes.append(node)

    def start(self, tries: int = 3) -> Cluster:
        """The head, then the workers. On a loaded machine a raylet can miss Ray's 30 s
        registration deadline and its ``ray start`` exits: that node is started again."""
        node = self._node("head")
        for attempt in range(tries):
            port, dash = free_port(), free_port()
            self.dashboard = f"http://127.0.0.1:{dash}"
            self._start(node, ["--head", f"--port={port}", "--num-cpus=0",
                               "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
                               f"--ray-client-server-port={free_port()}"])
            if self._wait_nodes(1, last=attempt == tries - 1):
                break
            self.kill(node)
        args = [f"127.0.0.1:{port}", "1"]
        workers = [self._node(f"worker{i}") for i in range(self.workers)]
        for w in workers:
            self._start(w, args)
        for attempt in range(tries):
            if self._wait_nodes(1 + self.workers, last=attempt == tries - 1):
                break
            for w in workers:
                if w.proc is not None and w.proc.poll() is not None:
                    self.kill(w)
                    self._start(w, args)
        from ray.util.state import list_nodes

        addresses = {n.node_ip for n in list_nodes(address=self.dashboard)}
        assert addresses == {"127.0.0.1"}, addresses  # every node on the loopback address
        return self

    def _client(self):
        from ray.job_submission import JobSubmissionClient

        return JobSubmissionClient(self.dashboard)

    def alive_nodes(self) -> int:
        from ray.util.state import list_nodes

        try:
            return sum(n.state == "ALIVE" for n in list_nodes(address=self.dashboard))
        except Exception:  # the state API is not up yet
            return -1

    def _wait_nodes(self, n: int, timeout: float = 180, last: bool = True) -> bool:
        """Until ``n`` nodes are alive; False (unless ``last``: raise) when a node's ``ray
        start`` exited or the time is up."""
        deadline = time.monotonic() + timeout
        while self.alive_nodes() != n:
            exited = [x.name for x in self.nodes
                      if x.proc is not None and x.proc.poll() is not None]
            if time.monotonic() > deadline or exited:
                if not last:
                    return False
                raise RuntimeError(f"expected {n} alive nodes, {self.alive_nodes()} are "
                                   f"(exited: {exited}): "
                                   f"{self.log(exited[0] if exited else 'head')}")
            time.sleep(1)
        return True

    def submit(self, entrypoint: str, job_id: str) -> subprocess.Popen:
        """KubeRay's submitter command line (K8sJobMode), with the entrypoint pasted in."""
        a = self.dashboard
        line = (f"if ! ray job status --address {a} {job_id} >/dev/null 2>&1 ; then "
                f"ray job submit --address {a} --no-wait --submission-id {job_id} -- "
                f"{entrypoint} ; fi ; ray job logs --address {a} --follow {job_id}")
        env = {**self.env, "PATH": f"{BIN}{os.pathsep}{self.env['PATH']}"}
        return subprocess.Popen(["/bin/bash", "-ce", line], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def wait(self, job_id: str, timeout: float = 900) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status = str(self._client().get_job_status(job_id).value)
            except RuntimeError as err:  # the submitter has not submitted it yet
                if "does not exist" not in str(err):
                    raise
                status = "PENDING"
            if status in TERMINAL:
                return status
            time.sleep(1)
        raise TimeoutError(f"job {job_id} still running after {timeout} s")

    def logs(self, job_id: str) -> str:
        return str(self._client().get_job_logs(job_id))

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text()[-3000:] if path.exists() else ""

    def kill(self, node: Node) -> None:
        """The node is lost: its raylet and workers are SIGKILLed, nothing is drained."""
        if node.proc is None:
            return
        try:
            os.killpg(node.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        node.proc.wait()

    def close(self) -> None:
        for node in reversed(self.nodes):
            if node.proc is not None and node.proc.poll() is None:
                os.killpg(node.proc.pid, signal.SIGTERM)
        for node in reversed(self.nodes):
            if node.proc is None:
                continue
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(node.proc.pid, signal.SIGKILL)
                node.proc.wait()
            try:  # raylet children that left the group (none expected)
                os.killpg(node.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shutil.rmtree(node.ray_tmp, ignore_errors=True)
