"""The warm interpreter keeps a cold stage's promises when something dies or limits the caller
(issue 46, items 3 and 4): a stage dies with its caller and with the server, a caller never
reports before its stage is gone, and a warm stage has its caller's CPU affinity, nice value,
rlimits, umask and cgroup, or runs cold and says why.

Real processes throughout; the stages are tests/runtime/test_warm.py's throw-away package plus
a probe of the limits and a stage with a child of its own. Deadlines bound the polls; what is
asserted is what is left alive, not how fast it went.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from pipeline.runtime import warm
from tests.conftest import ROOT
from tests.runtime.test_warm import Stages, _wait_gone, environment, stage_package

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.slow]

PROBE = """
import json, os, resource
import pipeline.runtime
mask = os.umask(0)
os.umask(mask)
print(json.dumps({"affinity": sorted(os.sched_getaffinity(0)),
                  "nice": os.getpriority(os.PRIO_PROCESS, 0),
                  "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
                  "umask": mask, "child": pipeline.runtime.warm._CHILD}))
"""

FAMILY = """
import subprocess, sys, time
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(kid.pid, flush=True)
time.sleep(120)
"""

# a caller that claims other limits than it has: its stage package's __init__ says so
CLAIMING = """
import json, pathlib
from pipeline.runtime import warm as _warm
_real = _warm.limits
_claims = json.loads((pathlib.Path(__file__).parent / "claims.json").read_text())
def _claimed():
    got = _real()
    got["rlimits"].update(_claims.pop("rlimits", {}))
    got.update(_claims)
    return got
_warm.limits = _claimed
_warm.hand_off()
"""


def _servers(key: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "from pipeline.runtime.warm import main" in " ".join(
                    process.info["cmdline"] or []) \
                    and process.environ().get("CBENCH_TEST_WARM_KEY") == key:
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def stages(tmp_path: Path) -> Iterator[Stages]:
    """test_warm's stages plus ``probe`` and ``family``; this test's servers killed after it."""
    folder = stage_package(tmp_path / "work")
    (folder / "stages" / "probe.py").write_text(PROBE)
    (folder / "stages" / "family.py").write_text(FAMILY)
    key = uuid.uuid4().hex
    yield Stages(folder, environment(key))
    for server in _servers(key):
        server.kill()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _family(stages: Stages) -> tuple[subprocess.Popen, int, int, int]:
    """A warm ``family`` stage once its own child runs: the caller, the stage's pid, its
    child's and the server's."""
    pid_file = stages.pid_file()
    caller = stages.start("stages.family", pid_file=pid_file)
    assert caller.stdout is not None
    kid = int(caller.stdout.readline())
    pid = int(pid_file.read_text().split()[0])
    return caller, pid, kid, psutil.Process(pid).ppid()


def test_a_killed_server_takes_its_stage_and_the_caller_fails(stages: Stages) -> None:
    """Catches: the caller exiting at once when the server dies (the old code: the stage's own
    child outlives it), and the caller not killing the stage's process group."""
    stages.until_warm("stages.echo")
    caller, pid, kid, server = _family(stages)
    os.kill(server, signal.SIGKILL)
    assert caller.wait(timeout=60) == 1
    # the caller reported only once nothing of its stage was left to write
    assert not _alive(pid) and not _alive(kid)
    assert "the warm server ended before the stage" in caller.stderr.read()  # type: ignore[union-attr]


def test_a_killed_server_takes_its_stage_while_the_caller_cannot_act(stages: Stages) -> None:
    """The stage dies with the server by itself (the caller stopped). Catches: no
    PR_SET_PDEATHSIG in the child."""
    stages.until_warm("stages.echo")
    caller, pid, _, server = _family(stages)
    caller.send_signal(signal.SIGSTOP)
    try:
        os.kill(server, signal.SIGKILL)
        assert _wait_gone(pid)
    finally:
        caller.kill()
        caller.wait(timeout=60)


def test_a_killed_caller_takes_its_stage_while_the_server_cannot_act(stages: Stages) -> None:
    """The stage watches its caller's connection itself (the server stopped). Catches: no
    watcher in the child (or one that kills the stage alone, not its process group)."""
    stages.until_warm("stages.echo")
    caller, pid, kid, server = _family(stages)
    os.kill(server, signal.SIGSTOP)
    try:
        caller.kill()
        caller.wait(timeout=60)
        assert _wait_gone(pid) and _wait_gone(kid)
    finally:
        os.kill(server, signal.SIGKILL)


def _limited(cpus: set[int], nofile: int, nice: int) -> Callable[[], None]:
    def limit() -> None:
        os.sched_setaffinity(0, cpus)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        os.nice(nice - os.nice(0))

    return limit


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to take one away")
def test_a_limited_caller_s_warm_stage_has_its_limits(stages: Stages) -> None:
    """``taskset -c <one cpu>; ulimit -n 256; nice -n 15`` in the caller: the warm stage has
    them, as the cold one does, though an unlimited caller's server was up first. Catches: the
    limits left out of the server's address (the unlimited server's child refuses the affinity,
    so the stage never runs warm), and a child that neither applies nor refuses them."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 256:
        pytest.skip("the hard open-files limit is below 256")
    stages.until_warm("stages.echo")  # a server of the unlimited caller
    one = min(os.sched_getaffinity(0))
    limit = _limited({one}, 256, 15)

    def run(env: dict[str, str]) -> tuple[dict, int | None]:
        pid_file = stages.pid_file()
        child = subprocess.Popen([sys.executable, "-m", "stages.probe"], cwd=stages.folder,
                                 env=dict(env, CBENCH_WARM_PID_FILE=str(pid_file)),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=limit)
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        pids = pid_file.read_text().split() if pid_file.exists() else []
        return json.loads(out.splitlines()[-1]), int(pids[0]) if pids else None

    until = time.monotonic() + 180
    got, pid = run(stages.env)
    while pid is None and time.monotonic() < until:
        time.sleep(1.0)
        got, pid = run(stages.env)
    assert pid is not None, "the limited caller never ran warm"
    cold, _ = run(dict(stages.env, CBENCH_WARM="off"))
    assert got["child"] is True and cold["child"] is False
    assert got["affinity"] == cold["affinity"] == [one]
    assert got["nofile"] == cold["nofile"] == [256, 256]
    assert got["nice"] == cold["nice"] == 15
    assert got["umask"] == cold["umask"]


def _claiming(tmp_path: Path, claims: dict) -> Stages:
    folder = stage_package(tmp_path / "claiming")
    (folder / "stages" / "__init__.py").write_text(CLAIMING)
    (folder / "stages" / "probe.py").write_text(PROBE)
    (folder / "stages" / "claims.json").write_text(json.dumps(claims))
    return Stages(folder, environment(uuid.uuid4().hex))


@pytest.fixture
def claiming(tmp_path: Path) -> Iterator[Callable[[dict], Stages]]:
    made: list[Stages] = []

    def make(claims: dict) -> Stages:
        made.append(_claiming(tmp_path, claims))
        return made[-1]

    yield make
    for stages in made:
        for server in _servers(stages.env["CBENCH_TEST_WARM_KEY"]):
            server.kill()


def test_the_child_applies_what_it_can_carry_over(claiming: Callable[[dict], Stages]) -> None:
    """A server whose limits differ from its caller's (the caller claims others: a higher nice
    value, a lower open-files limit, a stricter umask): the child applies them. Catches: a child
    that does not apply the nice value, the rlimits or the umask."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    stages = claiming({"nice": 19, "umask": 0o077, "rlimits": {"RLIMIT_NOFILE": [200, hard]}})
    done, pid = stages.until_warm("stages.probe")
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["child"] is True
    assert got["nice"] == 19 and got["umask"] == 0o077 and got["nofile"] == [200, hard]


@pytest.mark.parametrize("claims, says, names", [
    ({"cgroup": "0::/somewhere/else.scope\n"},
     "its cgroup differs (", "cgroup2 (0): /somewhere/else.scope, the server's "),
    ({"affinity": [-1]}, "its CPU affinity [-1] differs from the server's", ""),
])
def test_limits_that_cannot_be_carried_over_run_cold_and_say_why_once(
        claiming: Callable[[dict], Stages], claims: dict, says: str, names: str) -> None:
    """Catches: the cgroup or affinity check left out (the stage would run warm), and a
    refusal that is not said (or said twice)."""
    stages = claiming(claims)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # the first run starts the server; a later one meets it
        done, pid = stages.run("stages.probe")
        assert done.returncode == 0, done.stderr
        assert pid is None and json.loads(done.stdout.splitlines()[-1])["child"] is False
        if "runs cold" in done.stderr:
            assert done.stderr.count("runs cold") == 1
            assert f"runs cold: the warm server cannot give it this process's limits: {says}" \
                in done.stderr and names in done.stderr, done.stderr
            return
        time.sleep(1.0)
    raise AssertionError("no server answered within 180 s")


def test_cgroup_difference_compares_each_hierarchy() -> None:
    v1 = "12:memory:/slurm/uid_1/job_7\n11:cpu,cpuacct:/\n0::/\n"
    assert warm.cgroup_difference(v1, v1) is None
    assert warm.cgroup_difference("0::/user.slice/a.scope\n", "0::/user.slice/a.scope\n") is None
    moved = v1.replace("job_7", "job_8")
    assert warm.cgroup_difference(v1, moved) == \
        "memory: /slurm/uid_1/job_8, the server's /slurm/uid_1/job_7"
    assert warm.cgroup_difference("0::/a\n", "0::/b\n") == "cgroup2 (0): /b, the server's /a"
    assert warm.cgroup_difference(v1, "0::/\n") is not None  # hierarchies missing count
    # the hierarchy numbers differ across machines, the controllers name it
    assert warm.cgroup_difference("12:memory:/x\n", "9:memory:/x\n") is None


def test_carry_over_in_a_real_process() -> None:
    """carry_over in a fresh process: its own limits pass; a higher nice value, a lower
    open-files limit and a umask applied; an impossible rlimit, another affinity and another
    cgroup refused, saying which."""
    script = """
import json, os, resource
from pipeline.runtime import warm
out = {}
mine = warm.limits()
out["same"] = warm.carry_over(mine)
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
wanted = dict(mine, nice=min(19, mine["nice"] + 3), umask=0o027,
              rlimits=dict(mine["rlimits"], RLIMIT_NOFILE=[100, hard]))
out["applied"] = warm.carry_over(wanted)
out["now"] = warm.limits()
out["bad_rlimit"] = warm.carry_over(dict(wanted, rlimits={"RLIMIT_NOFILE": [300, 200]}))
out["affinity"] = warm.carry_over(dict(wanted, affinity=[9999]))
out["cgroup"] = warm.carry_over(dict(wanted, cgroup="0::/not/ours\\n"))
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["same"] is None and out["applied"] is None
    assert out["now"]["umask"] == 0o027 and out["now"]["rlimits"]["RLIMIT_NOFILE"][0] == 100
    assert out["now"]["nice"] == min(19, warm.limits()["nice"] + 3)
    assert out["bad_rlimit"].startswith("RLIMIT_NOFILE (300, 200) cannot replace")
    assert out["affinity"].startswith("its CPU affinity [9999] differs")
    assert out["cgroup"].startswith("its cgroup differs (")
    assert "cgroup2 (0): /not/ours, the server's" in out["cgroup"]


def test_the_address_follows_the_limits() -> None:
    env = {"PATH": "/bin"}
    mine = warm.limits()
    assert warm.address(env, mine) == warm.address(env, dict(mine))
    for key, value in [("nice", mine["nice"] + 1), ("umask", 0o077), ("affinity", [0]),
                       ("cgroup", "0::/elsewhere\n"),
                       ("rlimits", dict(mine["rlimits"], RLIMIT_NOFILE=[256, 256]))]:
        if mine[key] != value:
            assert warm.address(env, dict(mine, **{key: value})) != warm.address(env, mine), key
