"""A warm interpreter for ``python -m stages.<name>``: the libraries imported once, not per stage.

Every stage is a new Python process that imports torch, pandas, pyarrow, SciPy and Dask before it
reads a byte: about 2.5-3 s on two cores, paid again by each of the pipeline's stages, and at a
grid of a hundred tiny cells more than the cells' own analysis. On Linux a stage started as
exactly ``python -m stages.<name> [args]`` (``stages/__init__.py`` calls :func:`hand_off` first):

- finds this installation's *server* on a Unix socket and sends it its arguments, working
  folder, environment, ``sys.path`` and standard streams. The server forks a child that becomes
  the stage, with this project's modules imported afresh from disk (an edit is seen at once),
  and the child's exit status comes back: the starting process exits with it. A signal the
  starting process gets (Ctrl-C, a timeout's SIGTERM) goes to the child's process group.
- dies with its stage, and the stage with it: a starting process that is killed takes the
  stage's process group with it (the server and the child itself each see its connection
  close), and a server that dies takes its child (``PR_SET_PDEATHSIG``); the starting process
  then kills what is left of the stage's process group, waits until it is gone, and exits 1.
  The rule: the stage's outputs are written only while its caller waits for it, so a caller that
  reports failure has no stage left running behind it.
- carries its limits (:func:`limits`): CPU affinity, nice value, every ``RLIMIT_*``, umask and
  cgroup. They are part of the server's address, so a limited caller (``taskset``, ``nice``,
  ``ulimit``, a batch scheduler's cgroup) gets a server started under the same limits, whose
  libraries sized themselves to them at import (torch's, OpenBLAS's and Dask's thread and CPU
  counts are read then); the child applies the nice value, rlimits and umask again, and steps
  aside when it cannot have the caller's limits (:func:`carry_over`): the stage then runs cold,
  saying why once on standard error.
- finds none: starts one in the background (it imports :data:`PRELOAD`, then listens) and
  runs cold, as before.

A server serves one Python, environment and installation: its address is a digest of the
executable and version, the environment (less the shell's bookkeeping, :data:`VOLATILE`), the
installed packages' folder and this file; anything else asks for another server. It answers only
its own user (the peer's credentials, both ways), and exits after ``$CBENCH_WARM_IDLE_SECONDS``
(default :data:`IDLE_SECONDS`) with no stage running. ``$CBENCH_WARM=off`` runs every stage cold.
``$CBENCH_WARM_PID_FILE``: the starting process appends its stage's pid there (bench/ follows the
stage's memory with it).

This module imports only the standard library: ``stages/__init__.py`` imports it first.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import io
import json
import os
import resource
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WARM_ENV = "CBENCH_WARM"  # "on" (the default) or "off"
IDLE_ENV = "CBENCH_WARM_IDLE_SECONDS"
PID_FILE_ENV = "CBENCH_WARM_PID_FILE"
IDLE_SECONDS = 300.0
# What the stages import that costs: about 5 s once, in the server, instead of 2.5-3 s a stage.
# torch._dynamo: a torch optimizer's first construction imports it (1.1-1.5 s).
PRELOAD = ("numpy", "pandas", "pyarrow.parquet", "pyarrow.dataset", "scipy.stats",
           "scipy.special", "torch", "torch._dynamo", "dask", "dask.delayed", "dask.local",
           "dask.multiprocessing", "distributed", "matplotlib", "matplotlib.pyplot", "mlflow",
           "mlflow.store.tracking.sqlalchemy_store", "pydantic", "yaml", "jinja2", "tabulate",
           "tqdm", "cloudpickle", "psutil", "threadpoolctl", "safetensors.torch")
# Set per process by a shell, make or DVC (DVC_STAGE: the stage's name), or read only by the
# starting process: no import reads them, so one server serves any values of them (a stage still
# gets its own caller's).
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "MAKELEVEL", "MAKEFLAGS", "MFLAGS",
                      "DVC_STAGE", WARM_ENV, PID_FILE_ENV})
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
ROOT = Path(__file__).resolve().parents[2]  # the folder holding pipeline/ and stages/
_INT = struct.Struct("!i")
_TAGGED = struct.Struct("!ci")  # b"P": the stage's pid, b"S": its status, b"R": a refusal's size
_CREDENTIALS = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid
_CHILD = False  # True in a server's child: the stage runs here and is never handed off again


@dataclass(frozen=True)
class Request:
    """A stage to run: ``python -m module *args`` in ``cwd`` with ``env`` and ``path``, its
    standard streams ``fds``."""

    module: str
    args: list[str]
    cwd: str
    env: dict[str, str]
    path: list[str]
    fds: tuple[int, int, int]
    limits: dict[str, Any]


def setting() -> str:
    """``$CBENCH_WARM``: ``on`` (unset or empty too) or ``off``; anything else refused."""
    value = os.environ.get(WARM_ENV, "") or "on"
    if value not in ("on", "off"):
        raise SystemExit(f"{WARM_ENV}={value!r}: expected 'on' or 'off'")
    return value


def idle_seconds() -> float:
    """``$CBENCH_WARM_IDLE_SECONDS``: how long a server waits for a stage, a positive number."""
    raw = os.environ.get(IDLE_ENV, "")
    if not raw:
        return IDLE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise SystemExit(f"{IDLE_ENV}={raw!r}: expected a positive number of seconds")
    return value


def cgroup() -> str:
    """This process's ``/proc/self/cgroup`` ("" where there is none)."""
    try:
        return Path("/proc/self/cgroup").read_text()
    except OSError:
        return ""


def limits() -> dict[str, Any]:
    """What a stage started here runs under: CPU affinity, nice value, every ``RLIMIT_*`` this
    platform has (soft, hard), umask and cgroup."""
    mask = os.umask(0)
    os.umask(mask)
    rlimits, seen = {}, set()
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        if getattr(resource, name) in seen:  # an alias (RLIMIT_OFILE of RLIMIT_NOFILE)
            continue
        seen.add(getattr(resource, name))
        try:
            rlimits[name] = list(resource.getrlimit(getattr(resource, name)))
        except (OSError, ValueError):
            continue
    return {"affinity": sorted(os.sched_getaffinity(0)),
            "nice": os.getpriority(os.PRIO_PROCESS, 0), "rlimits": rlimits, "umask": mask,
            "cgroup": cgroup()}


def cgroup_difference(server: str, caller: str) -> str | None:
    """How the caller's ``/proc/self/cgroup`` text differs from the server's (None: the same
    groups): one "hierarchy: caller's path, server's path" per differing line."""

    def groups(text: str) -> dict[str, str]:
        got = {}
        for line in text.splitlines():
            number, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            if line.strip():
                got[controllers or f"cgroup2 ({number})"] = path
        return got

    ours, theirs = groups(server), groups(caller)
    differ = [f"{name or 'cgroup2'}: {theirs.get(name, 'none')!s}, the server's "
              f"{ours.get(name, 'none')!s}" for name in sorted(set(ours) | set(theirs))
              if ours.get(name) != theirs.get(name)]
    return "; ".join(differ) or None


def address(env: dict[str, str] | None = None, under: dict[str, Any] | None = None) -> str:
    """The abstract Unix socket of the server for this Python, ``env``, installation and
    :func:`limits` (``under``; this process's when None)."""
    env = dict(os.environ) if env is None else env
    under = limits() if under is None else under
    packages = sysconfig.get_paths()["purelib"]
    here = Path(__file__).resolve()

    def stamp(path: str | Path) -> list[Any]:
        try:
            info = os.stat(path)
        except OSError:
            return [str(path), None]
        return [str(path), info.st_mtime_ns, info.st_size]

    what = [os.path.realpath(sys.executable), sys.version, os.getuid(),
            sorted((k, v) for k, v in env.items() if k not in VOLATILE),
            stamp(packages), stamp(here), under]
    digest = hashlib.sha256(json.dumps(what).encode()).hexdigest()[:32]
    return f"\0cbench-warm-{digest}"


def _peer(sock: socket.socket) -> tuple[int, int]:
    """The peer's pid (at its ``connect`` or ``listen``) and uid."""
    pid, uid, _ = _CREDENTIALS.unpack(sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
    return pid, uid


def _same_user(sock: socket.socket) -> bool:
    return _peer(sock)[1] == os.getuid()


def _receive(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes, or fewer when the peer closed first."""
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _started_as_stage() -> str | None:
    """The stage module when this interpreter was started as exactly ``python -m stages.<x>``
    (no interpreter options) and is importing it now, else None."""
    argv = getattr(sys, "orig_argv", [])
    if len(argv) >= 3 and argv[1] == "-m" and argv[2].startswith("stages.") \
            and sys.argv[:1] == ["-m"]:
        return argv[2]
    return None


def hand_off() -> None:
    """Run this stage in the warm server and exit with its status; return at once (to run
    cold) when this is not a stage's start, on another OS, with ``$CBENCH_WARM=off``, when no
    server answers (one is started for the stages that follow), or when the server cannot give
    the stage this process's limits (said on standard error)."""
    if _CHILD or not sys.platform.startswith("linux"):
        return
    module = _started_as_stage()
    if module is None or setting() == "off":
        return
    idle_seconds()  # a bad value refused before any work
    under = limits()
    where = address(under=under)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(where)
    except OSError:
        sock.close()
        _start_server(where)
        return
    with sock:
        server, uid = _peer(sock)
        if uid != os.getuid():
            return
        pid = _send(sock, module, under)
        if pid is None:  # the server was ending, or refused: run cold
            return
        _wait(sock, pid, server)


def _send(sock: socket.socket, module: str, under: dict[str, Any]) -> int | None:
    """The request sent; the stage's pid, or None when the stage is to run cold (the server
    closed without one, or said why it cannot run it: that said here)."""
    payload = json.dumps({"module": module, "args": sys.argv[1:], "cwd": os.getcwd(),
                          "env": dict(os.environ), "path": list(sys.path),
                          "limits": under}).encode()
    try:
        socket.send_fds(sock, [_INT.pack(len(payload))], [0, 1, 2])
        sock.sendall(payload)
        got = _receive(sock, _TAGGED.size)
        if len(got) != _TAGGED.size:
            return None
        tag, value = _TAGGED.unpack(got)
        if tag == b"R":
            why = _receive(sock, value).decode(errors="replace")
            sys.stderr.write(f"{module}: runs cold: the warm server cannot give it this "
                             f"process's limits: {why}\n")
            return None
        if tag != b"P":
            sys.stderr.write(f"{module}: runs cold: the warm server's child ended (status "
                             f"{value}) before the stage started\n")
            return None
    except OSError:  # a standard stream closed, or the server gone
        return None
    return value


def _wait(sock: socket.socket, pid: int, server: int) -> None:
    """Forward signals to the stage ``pid`` until its status arrives; exit with it. A server
    that ends first (``server``: its pid) leaves no status: the stage's process group is killed,
    and this process exits 1 once it is gone."""
    if pid_file := os.environ.get(PID_FILE_ENV):
        with open(pid_file, "a") as out:
            out.write(f"{pid}\n")

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    watch = select.poll()
    watch.register(sock, select.POLLIN)
    server_fd: int | None = None
    try:
        server_fd = os.pidfd_open(server)
        watch.register(server_fd, select.POLLIN)
    except OSError:  # gone already, or no pidfds here: the connection's end alone says it
        server_fd = None
    if sock.fileno() not in {fd for fd, _ in watch.poll()}:
        # the server ended: a status it sent is in the connection already; without one the
        # connection stays open while the stage's processes hold it
        sock.settimeout(1.0)
    try:
        got = _receive(sock, _TAGGED.size)
    except OSError:
        got = b""
    if server_fd is not None:
        os.close(server_fd)
    if len(got) != _TAGGED.size or _TAGGED.unpack(got)[0] != b"S":
        _kill_group(pid)
        sys.stderr.write(f"{_started_as_stage()}: the warm server ended before the stage (pid "
                         f"{pid}) did; the stage was stopped and counts as failed. "
                         f"{WARM_ENV}=off runs stages without the server\n")
        raise SystemExit(1)
    code = _TAGGED.unpack(got)[1]
    if code < 0:  # killed by signal -code: end the same way
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    raise SystemExit(code)


def _group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _kill_group(pgid: int, seconds: float = 30.0) -> None:
    """SIGKILL to process group ``pgid`` until none of it is left (at most ``seconds``)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if not _group_members(pgid):
            return
        time.sleep(0.02)


def _start_server(where: str) -> None:
    """A detached server for ``where``: its own session, no terminal, this environment."""
    entry = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
             "from pipeline.runtime.warm import main; main()")
    try:
        subprocess.Popen([sys.executable, "-c", entry, where.lstrip("\0")], cwd=ROOT,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except (OSError, ValueError):
        pass  # no server: every stage runs cold


def preload() -> list[str]:
    """:data:`PRELOAD` imported, and pydantic's first model built (its schema machinery imports
    and caches on first use: 0.2 s of every stage's params); the modules that would not import
    (not installed) listed."""
    import importlib

    missing = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # an optional library absent or broken here: the stage will say
            missing.append(name)
    try:  # only in the server, by name as the rest: this module imports the stdlib alone
        pydantic = importlib.import_module("pydantic")
        pydantic.create_model("WarmUp", x=(int, 0), y=(list[float], []))(x=1, y=[2.0])
    except Exception:
        missing.append("pydantic")
    return missing


def main() -> None:
    """The server's process (``sys.argv[1]``: its abstract address without the leading NUL),
    and after a fork the stage's."""
    child = serve("\0" + sys.argv[1], idle_seconds())
    if child is not None:
        run(*child)


def serve(where: str, idle: float) -> tuple[Request, socket.socket, int] | None:
    """Listen on ``where`` until ``idle`` seconds pass with no stage running. Returns None in the
    server when it ends; in a forked child that is to become the stage, the :class:`Request`, the
    connection to its caller and the server's pid."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(where)  # claims the name before the imports: a second server ends here
    except OSError:
        listener.close()
        return None
    preload()
    # what the imports built, out of the collector's way: a stage's first full collection would
    # otherwise walk all of it (0.2 s), and touch, so copy, every page it shares with the server
    gc.collect()
    gc.freeze()
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    running: dict[int, tuple[int, socket.socket, int]] = {}  # pidfd -> pid, client, pidfd
    try:
        while True:
            events = selector.select(None if running else idle)
            if not events and not running:
                return None
            for key, _ in events:
                if key.data == "listener":
                    child = _accept(listener, selector, running)
                    if child is not None:
                        return child
                elif key.data[0] == "exited":
                    _reap(selector, running, key.data[1])
                else:  # the client closed before its stage ended: it was killed, the stage
                    _, pid, client = key.data  # goes as a cold one would have: SIGKILL
                    selector.unregister(client)
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    finally:
        if not _CHILD:
            selector.close()
            listener.close()


def _accept(listener: socket.socket, selector: selectors.BaseSelector,
            running: dict[int, tuple[int, socket.socket, int]]
            ) -> tuple[Request, socket.socket, int] | None:
    """A client's request read and its stage forked; in the child the request, the connection
    and the server's pid, None here. The child tells the client its pid (or why it cannot run
    the stage), this process the stage's status once it ends."""
    global _CHILD
    client, _ = listener.accept()
    request = None
    try:
        client.settimeout(10.0)
        if _same_user(client):
            request = _read_request(client)
    except (OSError, ValueError):
        request = None
    if request is None:
        client.close()
        return None
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        _CHILD = True
        for _, _, pidfd in running.values():
            os.close(pidfd)
        for other in [k.fileobj for k in selector.get_map().values()]:
            if isinstance(other, socket.socket):
                other.close()
        selector.close()
        return request, client, server
    try:
        os.setpgid(pid, pid)  # as the child does: a killpg from here reaches it either way
    except OSError:
        pass
    for fd in request.fds:
        os.close(fd)  # the client's streams: only the child holds them now
    pidfd = os.pidfd_open(pid)
    running[pidfd] = (pid, client, pidfd)
    selector.register(pidfd, selectors.EVENT_READ, ("exited", pidfd))
    selector.register(client, selectors.EVENT_READ, ("client", pid, client))
    return None


def _read_request(client: socket.socket) -> Request | None:
    head, fds, flags, _ = socket.recv_fds(client, _INT.size, 3)
    if len(fds) != 3 or flags & socket.MSG_CTRUNC:
        for fd in fds:
            os.close(fd)
        return None
    head += _receive(client, _INT.size - len(head))
    if len(head) != _INT.size:
        for fd in fds:
            os.close(fd)
        return None
    payload = _receive(client, _INT.unpack(head)[0])
    try:
        got = json.loads(payload)
        return Request(got["module"], got["args"], got["cwd"], got["env"], got["path"],
                       (fds[0], fds[1], fds[2]), dict(got["limits"]))
    except (ValueError, KeyError, TypeError):
        for fd in fds:
            os.close(fd)
        return None


def _reap(selector: selectors.BaseSelector, running: dict[int, tuple[int, socket.socket, int]],
          pidfd: int) -> None:
    """A stage ended: its status to its client."""
    pid, client, _ = running.pop(pidfd)
    selector.unregister(pidfd)
    os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    with client:
        if client.fileno() in selector.get_map():
            selector.unregister(client)
        try:
            client.sendall(_TAGGED.pack(b"S", os.waitstatus_to_exitcode(status)))
        except OSError:
            pass


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(server: int) -> None:
    """SIGKILL to this process when the server (``server``, its parent) dies; at once if it
    already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # no prctl: the caller still kills the stage when the server ends
    if os.getppid() != server:
        os._exit(1)


def _watch_caller(link: socket.socket) -> None:
    """A thread that kills this process group when the caller's end of ``link`` closes (the
    caller died): the server does too, this covers a server that is stopped or busy. A bare
    ``_thread``: no ``threading`` object, so the stage's ``threading`` sees none and its exit
    does not wait for it."""
    import _thread

    def watch() -> None:
        poller = select.poll()
        poller.register(link.fileno(), select.POLLRDHUP)
        while True:
            for _, event in poller.poll():
                if event & select.POLLNVAL:  # the stage closed the descriptor: watch no more
                    return
                os.killpg(0, signal.SIGKILL)

    _thread.start_new_thread(watch, ())


def carry_over(wanted: dict[str, Any]) -> str | None:
    """This process given the caller's :func:`limits` ``wanted``; None when done, else why it
    cannot be. The cgroup and the CPU affinity must be the server's already (the preloaded
    libraries sized their thread pools and CPU counts to them at import: changing them here
    would not change those); the nice value (raised freely, lowered with privilege only), the
    rlimits (a hard one raised with privilege only) and the umask are applied."""
    if difference := cgroup_difference(cgroup(), wanted["cgroup"]):
        return f"its cgroup differs ({difference})"
    here = sorted(os.sched_getaffinity(0))
    if wanted["affinity"] != here:
        return f"its CPU affinity {wanted['affinity']} differs from the server's {here}"
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if wanted["nice"] != nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, wanted["nice"])
        except OSError as error:
            return f"nice {wanted['nice']} is below the server's {nice} ({error.strerror})"
    for name, (soft, hard) in sorted(wanted["rlimits"].items()):
        which = getattr(resource, name, None)
        if which is None:
            return f"{name} is unknown to the server"
        now = resource.getrlimit(which)
        if (soft, hard) != now:
            try:
                resource.setrlimit(which, (soft, hard))
            except (OSError, ValueError) as error:
                return f"{name} ({soft}, {hard}) cannot replace the server's {now} ({error})"
    os.umask(wanted["umask"])
    return None


def run(request: Request, link: socket.socket, server: int) -> None:
    """This forked child becomes the stage: its own process group, killed when the server
    (``server``) or the caller (the other end of ``link``) dies, the caller's limits, streams,
    environment, folder and path, this project's modules imported afresh, then the module run
    as ``__main__``; it ends as :func:`_end` says. When it cannot have the caller's limits it
    says why to the caller (which runs the stage cold) and ends."""
    import importlib
    import runpy

    try:
        os.setpgid(0, 0)
        _die_with_parent(server)
        why = carry_over(request.limits)
        if why is not None:
            text = why.encode()
            link.sendall(_TAGGED.pack(b"R", len(text)) + text)
            os._exit(0)
        link.sendall(_TAGGED.pack(b"P", os.getpid()))
        _watch_caller(link)
    except BaseException:  # noqa: BLE001 - the caller gone, or a bad request: no stage here
        os._exit(1)  # (and none of the server's exit handlers in its copy)
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    unbuffered = bool(request.env.get("PYTHONUNBUFFERED"))  # as the server's (same environment)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=os.isatty(1) or unbuffered)
    os.environ.clear()
    os.environ.update(request.env)
    os.chdir(request.cwd)
    sys.path[:] = request.path
    for name in list(sys.modules):
        top = name.split(".")[0]
        if top in ("pipeline", "stages") and name != __name__:
            del sys.modules[name]
    importlib.invalidate_caches()
    # this module stays (it holds _CHILD); the packages above it, imported afresh, hold it again
    package, _, name = __name__.rpartition(".")
    setattr(importlib.import_module(package), name, sys.modules[__name__])
    sys.argv = ["-m", *request.args]
    try:
        runpy.run_module(request.module, run_name="__main__", alter_sys=True)
    except BaseException as error:  # noqa: BLE001 - every ending is the stage's exit status
        _end(error)
    _end(None)


def _end(error: BaseException | None) -> None:
    """Exit as the interpreter would after ``error`` (None: the module returned): an uncaught
    exception's traceback and status 1, ``SystemExit``'s status or message, Ctrl-C's SIGINT;
    after the same waits: the non-daemon threads joined, then the ``atexit`` functions run, the
    streams flushed. It skips only the teardown of the interpreter's modules, which after
    torch, MLflow and the rest takes about 2 s and writes nothing."""
    import atexit
    import threading

    code = 0
    if isinstance(error, SystemExit):
        if error.code is None or isinstance(error.code, int):
            code = error.code or 0
        else:
            print(error.code, file=sys.stderr)
            code = 1
    elif error is not None:
        sys.excepthook(type(error), error, error.__traceback__)
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx does first
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if isinstance(error, KeyboardInterrupt):  # the interpreter ends by SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF)
