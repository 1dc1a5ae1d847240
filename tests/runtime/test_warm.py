"""The warm interpreter (pipeline/runtime/warm.py): a stage handed to the server behaves as the
same stage started cold, in what it sees, what it prints, how it ends and how it is stopped.

The stages here are a throw-away ``stages`` package in a temporary folder whose
``__init__.py`` hands off as the project's does; one real stage (resolve) runs both ways too.
Every test asks for its own server through a key in the environment, with a short idle time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from pipeline.runtime import warm
from tests.conftest import ROOT, Project, venv_env

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.slow]

ECHO = """
import atexit, json, os, sys, threading, time
import pipeline.runtime
def later():
    time.sleep(0.3)
    print("thread done", flush=True)
threading.Thread(target=later).start()
atexit.register(lambda: print("atexit ran", flush=True))
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(),
                  "ppid": os.getppid(), "name": __name__,
                  "child": pipeline.runtime.warm._CHILD,
                  "pid_file": os.environ.get("CBENCH_WARM_PID_FILE"), "value": VALUE}))
"""

ENDINGS = """
import sys, time
how = sys.argv[1]
if how == "status":
    sys.exit(7)
if how == "raise":
    raise ValueError("boom")
if how == "message":
    sys.exit("the stage refused")
if how == "sleep":
    print("sleeping", flush=True)
    time.sleep(120)
"""


def stage_package(folder: Path) -> Path:
    """``folder/stages``: an ``__init__`` that hands off, ``echo`` and ``endings``."""
    package = folder / "stages"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from pipeline.runtime import warm as _warm\n_warm.hand_off()\n")
    (package / "echo.py").write_text("VALUE = 1\n" + ECHO)
    (package / "endings.py").write_text(ENDINGS)
    return folder


def environment(key: str, **extra: str) -> dict[str, str]:
    """This test's server (``CBENCH_TEST_WARM_KEY``), found through the repo's code."""
    env = dict(os.environ, CBENCH_WARM="on", CBENCH_TEST_WARM_KEY=key,
               CBENCH_WARM_IDLE_SECONDS="30", PYTHONPATH=str(ROOT))
    env.update(extra)
    env.pop("CBENCH_WARM_PID_FILE", None)
    return env


class Stages:
    """Runs ``python -m stages.<name>`` in ``folder``; says whether a run was handed off."""

    def __init__(self, folder: Path, env: dict[str, str]):
        self.folder, self.env, self.n = folder, env, 0

    def pid_file(self) -> Path:
        self.n += 1
        return self.folder / f"pids-{self.n}"

    def start(self, *args: str, env: dict[str, str] | None = None,
              pid_file: Path | None = None) -> subprocess.Popen:
        env = dict(env or self.env)
        if pid_file is not None:
            env["CBENCH_WARM_PID_FILE"] = str(pid_file)
        return subprocess.Popen([sys.executable, "-m", *args], cwd=self.folder, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, *args: str, env: dict[str, str] | None = None
            ) -> tuple[subprocess.CompletedProcess, int | None]:
        """The finished run, and its stage's pid when the server ran it (else None)."""
        pid_file = self.pid_file()
        child = self.start(*args, env=env, pid_file=pid_file)
        out, err = child.communicate(timeout=120)
        done = subprocess.CompletedProcess(child.args, child.returncode, out, err)
        pids = pid_file.read_text().split() if pid_file.exists() else []
        return done, int(pids[0]) if pids else None

    def until_warm(self, *args: str) -> tuple[subprocess.CompletedProcess, int]:
        """Runs ``args`` until the server (started by the first run) takes one."""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            done, pid = self.run(*args)
            assert done.returncode == 0, done.stderr
            if pid is not None:
                return done, pid
            time.sleep(1.0)
        raise AssertionError("no warm server answered within 180 s")


@pytest.fixture
def stages(tmp_path: Path) -> Stages:
    return Stages(stage_package(tmp_path / "work"), environment(uuid.uuid4().hex))


def echo_of(done: subprocess.CompletedProcess) -> dict:
    import json

    return json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))


def test_a_warm_stage_sees_its_call_and_ends_as_a_cold_one(stages: Stages) -> None:
    stages.until_warm("stages.echo")
    done, pid = stages.run("stages.echo", "a", "b c")
    assert pid is not None
    got = echo_of(done)
    assert got["pid"] == pid  # the stage ran in the server's child
    assert got["argv"] == [str(stages.folder / "stages" / "echo.py"), "a", "b c"]
    assert got["cwd"] == str(stages.folder)
    assert got["name"] == "__main__"
    assert got["child"] is True  # the package imported afresh holds the module that ran it
    assert got["pid_file"] == str(stages.folder / f"pids-{stages.n}")  # this call's environment
    # a non-daemon thread is joined, then the atexit functions run, before the status comes back
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["thread done", "atexit ran"]
    again, pid2 = stages.run("stages.echo")
    assert pid2 is not None and pid2 != pid
    assert echo_of(again)["ppid"] == got["ppid"]  # one server, a child per stage

    cold, cold_pid = stages.run("stages.echo", "a", "b c", env=dict(stages.env, CBENCH_WARM="off"))
    assert cold_pid is None and echo_of(cold)["child"] is False
    assert echo_of(cold)["argv"] == got["argv"] and cold.stdout.splitlines()[-2:] == lines[-2:]


@pytest.mark.parametrize("how, status, last", [
    ("status", 7, None),
    ("raise", 1, "ValueError: boom"),
    ("message", 1, "the stage refused"),
])
def test_exit_statuses_and_errors_are_the_stage_s(stages: Stages, how: str, status: int,
                                                  last: str | None) -> None:
    stages.until_warm("stages.echo")
    done, pid = stages.run("stages.endings", how)
    cold, _ = stages.run("stages.endings", how, env=dict(stages.env, CBENCH_WARM="off"))
    assert pid is not None
    assert done.returncode == cold.returncode == status
    assert done.stderr.strip().splitlines()[-1:] == cold.stderr.strip().splitlines()[-1:]
    if last is not None:
        assert done.stderr.strip().splitlines()[-1] == last


def test_an_edited_stage_is_imported_afresh(stages: Stages) -> None:
    stages.until_warm("stages.echo")
    (stages.folder / "stages" / "echo.py").write_text("VALUE = 'two'\n" + ECHO)
    done, pid = stages.run("stages.echo")
    assert pid is not None and echo_of(done)["value"] == "two"


def _wait_gone(pid: int, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


def _started(stages: Stages) -> tuple[subprocess.Popen, int]:
    """A warm ``endings sleep`` once it prints; the caller and the stage's pid."""
    pid_file = stages.pid_file()
    caller = stages.start("stages.endings", "sleep", pid_file=pid_file)
    assert caller.stdout is not None
    assert caller.stdout.readline().strip() == "sleeping"
    return caller, int(pid_file.read_text().split()[0])


def test_a_signal_to_the_caller_reaches_the_stage(stages: Stages) -> None:
    stages.until_warm("stages.echo")
    caller, pid = _started(stages)
    caller.send_signal(signal.SIGTERM)
    assert caller.wait(timeout=60) == -signal.SIGTERM  # ended as the stage did: by SIGTERM
    assert _wait_gone(pid)


def test_a_killed_caller_takes_its_stage_down(stages: Stages) -> None:
    stages.until_warm("stages.echo")
    caller, pid = _started(stages)
    caller.kill()
    caller.wait(timeout=60)
    assert _wait_gone(pid)


def test_the_server_ends_when_idle(tmp_path: Path) -> None:
    stages = Stages(stage_package(tmp_path / "work"),
                    environment(uuid.uuid4().hex, CBENCH_WARM_IDLE_SECONDS="1"))
    done, _ = stages.until_warm("stages.echo")
    assert _wait_gone(echo_of(done)["ppid"], 60.0)


@pytest.mark.parametrize("key, value, says", [
    ("CBENCH_WARM", "maybe", "CBENCH_WARM='maybe': expected 'on' or 'off'"),
    ("CBENCH_WARM_IDLE_SECONDS", "-1", "CBENCH_WARM_IDLE_SECONDS='-1': expected a positive"),
    ("CBENCH_WARM_IDLE_SECONDS", "soon", "CBENCH_WARM_IDLE_SECONDS='soon': expected a positive"),
    ("CBENCH_WARM_IDLE_SECONDS", "nan", "CBENCH_WARM_IDLE_SECONDS='nan': expected a positive"),
])
def test_bad_settings_are_refused_before_the_stage_runs(tmp_path: Path, key: str, value: str,
                                                        says: str) -> None:
    stages = Stages(stage_package(tmp_path / "work"), environment(uuid.uuid4().hex))
    done, pid = stages.run("stages.echo", env=dict(stages.env, **{key: value}))
    assert done.returncode != 0 and pid is None
    assert says in done.stderr
    assert "{" not in done.stdout  # the stage never started


def test_the_address_follows_what_imports_read_and_no_more() -> None:
    env = {"PATH": "/bin", "OMP_NUM_THREADS": "1"}
    assert warm.address(env) == warm.address(dict(env, PWD="/elsewhere", SHLVL="3",
                                                  CBENCH_WARM_PID_FILE="/tmp/x"))
    assert warm.address(env) != warm.address(dict(env, OMP_NUM_THREADS="2"))
    assert warm.address(env) != warm.address(dict(env, PYTHONHASHSEED="0"))
    assert warm.address(env).startswith("\0cbench-warm-")


def test_a_real_stage_writes_the_same_warm_and_cold(project: Project) -> None:
    """stages.resolve through the project's own ``stages/__init__``: the same file and the same
    refusal of a bad profile, warm and cold."""
    env = dict(venv_env(project.store), CBENCH_WARM="on", CBENCH_TEST_WARM_KEY=uuid.uuid4().hex,
               CBENCH_WARM_IDLE_SECONDS="30")
    stages = Stages(project.path, env)
    resolved = project.path / "params.resolved.yaml"
    stages.until_warm("stages.resolve")
    warm_text = resolved.read_text()
    resolved.unlink()
    cold, pid = stages.run("stages.resolve", env=dict(env, CBENCH_WARM="off"))
    assert cold.returncode == 0 and pid is None
    assert resolved.read_text() == warm_text
    bad = ("stages.resolve", "--profile", "profiles/no-such-profile.yaml")
    warm_bad, pid = stages.run(*bad)
    cold_bad, _ = stages.run(*bad, env=dict(env, CBENCH_WARM="off"))
    assert pid is not None
    assert warm_bad.returncode == cold_bad.returncode != 0
    assert warm_bad.stderr == cold_bad.stderr
