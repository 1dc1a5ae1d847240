"""Drivers and writers racing on one cell store, with real processes on the real file system.

Claims are leases on the reader's own monotonic clock (injected here, so each interleaving is
one the test chooses, not one the machine's load happens to make); a PID is checked only in
the same kernel and PID namespace; each writer stages in its own folder; publishing is
first-writer-wins. The invariants: each cell trained once, none lost, none replaced.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from pipeline.runtime.store import files, folders, layout
from pipeline.runtime.store.claims import Claims, Holder
from tests.conftest import ROOT

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]  # a new PID namespace, same hostname


def _env() -> dict[str, str]:
    """This checkout first on the children's path, whatever is installed."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _unshare_refused() -> str:
    """'' when this machine lets us make a PID namespace, else why not."""
    try:
        done = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    return "" if done.returncode == 0 else done.stderr.strip() or f"exit {done.returncode}"


def _wait(condition, what: str, timeout: float = 120.0) -> None:
    """Poll ``condition`` until true; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _heartbeat(store_dir: Path, driver: str) -> bytes:
    try:
        return (store_dir / "claims" / "drivers" / f"{driver}.json").read_bytes()
    except FileNotFoundError:
        return b""


def _next_beat(store_dir: Path, driver: str) -> None:
    """Wait until ``driver``'s heartbeat changes from what it is now."""
    now = _heartbeat(store_dir, driver)
    _wait(lambda: _heartbeat(store_dir, driver) != now, f"a heartbeat of {driver}")


# --- (a) two drivers in different PID namespaces ------------------------------------------

DRIVER = textwrap.dedent("""
    import sys
    from pipeline.runtime.store.claims import Claims
    now = [0.0]
    with Claims(sys.argv[1], ttl=10.0, beat=0.02, clock=lambda: now[0]) as claims:
        print(claims.me.driver, flush=True)
        for line in sys.stdin:
            command, arg = line.split()
            if command == "clock":
                now[0] = float(arg)
                print("ok", flush=True)
            else:
                print(int(claims.try_claim(arg)), flush=True)
""")


class _Driver:
    """A driver process whose reader clock the test sets; it beats on its own (real time)."""

    def __init__(self, store_dir: Path, prefix: list[str]):
        self.proc = subprocess.Popen([*prefix, sys.executable, "-c", DRIVER, str(store_dir)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=_env())
        self.driver = self._line()

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        assert line, f"the driver exited ({self.proc.wait()})"
        return line.strip()

    def claim(self, key: str, at: float) -> bool:
        """try_claim(key) with the driver's clock at ``at`` seconds."""
        self.proc.stdin.write(f"clock {at}\nclaim {key}\n")
        self.proc.stdin.flush()
        assert self._line() == "ok"
        return self._line() == "1"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def test_drivers_in_two_pid_namespaces_keep_each_others_live_claims(tmp_path):
    """Same hostname, other PID namespace (a container with host networking): the other's
    PID means nothing here, so only its heartbeat counts. Each reader's clock jumps 100 s
    (ten ttls) between looks while the other beats: neither takes the other's claim. Killed,
    the holder stops beating, and the other takes its claim once its heartbeat has not moved
    for a ttl of the taker's clock."""
    refused = _unshare_refused()
    if refused:
        pytest.skip(f"cannot make a PID namespace here (unshare: {refused})")
    a = _Driver(tmp_path, [])  # this test's PID namespace
    b = _Driver(tmp_path, UNSHARE)  # its own: A's PID is not visible there, nor B's here
    try:
        assert a.claim("a/v", 0.0) and b.claim("b/v", 0.0)
        for t in (0.0, 100.0, 200.0):
            assert not b.claim("a/v", t), f"B took A's live claim at t={t}"
            assert not a.claim("b/v", t), f"A took B's live claim at t={t}"
            _next_beat(tmp_path, a.driver)  # each beats after the other's look
            _next_beat(tmp_path, b.driver)
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(timeout=60)
        if not b.claim("a/v", 300.0):  # A beat once more before it died: a new ttl from t=300
            assert not b.claim("a/v", 305.0), "taken before a ttl of B's clock"
            assert b.claim("a/v", 311.0), "A's claim not taken a ttl after its last beat"
        holder = json.loads((tmp_path / "claims" / "a-v.json").read_text())
        assert holder["driver"] == b.driver
        assert json.loads((tmp_path / "claims" / "b-v.json").read_text())["driver"] == b.driver
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
        a.close()
        b.close()


# --- (b) skewed clocks ------------------------------------------------------------------------

def _far(tmp_path: Path, skew: float) -> tuple[Holder, Callable[[int], None]]:
    """A holder on another host whose clock is ``skew`` seconds off; returns it and its beat."""
    far = Holder("far", "another-host", 4242, time.time() + skew)
    files.atomic_write_json(tmp_path / "claims" / "c-v.json", asdict(far))

    def beat(count: int) -> None:
        files.atomic_write_json(tmp_path / "claims" / "drivers" / "far.json",
                                  {**asdict(far), "count": count, "beat": time.time() + skew})
    return far, beat


@pytest.mark.parametrize("skew", [-6 * 3600.0, 6 * 3600.0], ids=["hours-behind", "hours-ahead"])
def test_a_skewed_clock_neither_kills_a_live_holder_nor_keeps_a_dead_one(tmp_path, skew):
    now = [0.0]
    with Claims(tmp_path, ttl=30.0, clock=lambda: now[0]) as reader:
        _, beat = _far(tmp_path, skew)
        beat(1)
        for count in range(2, 7):  # it beats: alive over 100 s of the reader's clock
            assert not reader.try_claim("c/v"), f"a beating holder taken at t={now[0]}"
            now[0] += 20.0
            beat(count)
        assert not reader.try_claim("c/v")  # the last beat, seen at t=100
        now[0] += 29.0
        assert not reader.try_claim("c/v")  # unchanged for 29 s < ttl
        now[0] += 2.0
        assert reader.try_claim("c/v")  # unchanged for 31 s of the reader's clock: dead


def test_a_claim_never_seen_beating_gets_a_full_ttl_from_the_first_look(tmp_path):
    """No heartbeat file (yet, or ever), a claim written a day ago by another host's clock."""
    now = [1000.0]
    with Claims(tmp_path, ttl=30.0, clock=lambda: now[0]) as reader:
        old = Holder("quiet", "another-host", 1, time.time() - 86400)
        files.atomic_write_json(tmp_path / "claims" / "c-v.json", asdict(old))
        assert reader.holder("c/v") == old  # first look
        now[0] += 29.0
        assert reader.holder("c/v") == old
        now[0] += 2.0
        assert reader.holder("c/v") is None and reader.try_claim("c/v")


def test_a_pid_is_checked_only_in_the_same_kernel_and_pid_namespace(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(gone.stdout)
    now = [0.0]
    with Claims(tmp_path, ttl=30.0, clock=lambda: now[0]) as reader:
        me = reader.me
        elsewhere = Holder("ns", me.host, pid, time.time(), me.boot, me.pidns + 1)
        files.atomic_write_json(tmp_path / "claims" / "c-v.json", asdict(elsewhere))
        files.atomic_write_json(tmp_path / "claims" / "drivers" / "ns.json", {"count": 1})
        assert reader.holder("c/v") == elsewhere  # that PID is not ours to look up: it beats
        here = Holder("ns", me.host, pid, time.time(), me.boot, me.pidns)
        files.atomic_write_json(tmp_path / "claims" / "c-v.json", asdict(here))
        assert reader.holder("c/v") is None  # same namespace, the process is gone: dead


# --- (c) a writer stopped or killed between staging and publishing ------------------------

WRITER = textwrap.dedent("""
    import json, sys
    from pipeline.config import expand, from_mapping
    from pipeline.datasets import load_dataset
    from pipeline.runtime.cells import one_cell
    from pipeline.runtime.store.claims import Claims
    store_dir, params, folder, key = sys.argv[1:5]
    publish = one_cell.publish

    def paused(work, final):  # the hook: the test stops or kills this writer here
        print("staged", work, flush=True)
        sys.stdin.readline()
        return publish(work, final)

    one_cell.publish = paused
    cell = expand(from_mapping(json.loads(params)))[0]
    dataset = load_dataset("laplace", 600, 200, 0, {"input_dim": 16})
    with Claims(store_dir, beat=0.02) as claims:
        assert claims.try_claim(key)
        outcome = one_cell.run_cell(cell, dataset, folder, {})
        print("done", outcome.status, int(outcome.reused), flush=True)
""")


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t")


def _writer_and_retry(tmp_path, tiny_params, stop: bool):
    """A writer that stages one cell and then stops (SIGSTOP) or dies (SIGKILL) before it
    publishes; a second driver then trains the cell under the claim, the real way
    (``grid_run.train``, ``run_cell``)."""
    from pipeline.config import expand, from_mapping
    from pipeline.datasets import load_dataset
    from pipeline.runtime.cells.one_cell import run_cell
    from pipeline.runtime.grid_run import plan, train

    dataset = load_dataset("laplace", 600, 200, 0, {"input_dim": 16})
    cell = expand(from_mapping(tiny_params))[0]
    store_dir = tmp_path / "store"
    entries = plan([cell], store_dir / "cells", dataset.content_hash(), [], "retrain")
    entry, final = entries[0], Path(entries[0].folder)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store_dir),
                               json.dumps(tiny_params), str(final), entry.key],
                              stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=_env())
    said = writer.stdout.readline().split()
    assert said[:1] == ["staged"], (said, writer.communicate())
    work = Path(said[1])
    assert (work / "cell.json").is_file() and not final.exists()  # staged, not published
    writer.send_signal(signal.SIGSTOP if stop else signal.SIGKILL)
    if stop:
        _wait(lambda: _stopped(writer.pid), "the writer to stop")
    else:
        writer.wait(timeout=60)
    assert not final.exists()  # nothing at the final path: not half a cell

    now = [0.0]
    ran: list[str] = []

    def run(todo, finished):
        out = []
        for e in todo:
            ran.append(e.cell.cell_id)
            outcome = run_cell(e.cell, dataset, e.folder, {})
            finished(e, outcome)
            out.append(outcome)
        return out

    with Claims(store_dir, ttl=10.0, clock=lambda: now[0]) as mine:
        if stop:  # its process is there but its heartbeat has stopped
            assert mine.holder(entry.key) is not None  # first look: a full ttl from now
            other = files.staging_dir(final)  # (e) another writer stages beside it
            now[0] = 9.0
            assert mine.holder(entry.key) is not None and not mine.try_claim(entry.key)
            assert work.is_dir(), "a live claim's staging was removed"
            assert other.is_dir() and other != work
            files.remove_tree(other)
            now[0] = 11.0
            assert mine.holder(entry.key) is None  # a ttl of this reader's clock: dead
        trained, reused = train(entries, mine, run, lambda batch: None,
                                lambda e: folders.inspect(e.folder))
    assert ran == [cell.cell_id] and set(trained) == {cell.cell_id} and not reused
    assert not work.exists()  # the dead claim's staging, removed by the driver that took it
    assert folders.inspect(final).status == "done"
    assert sorted(os.listdir(final.parent)) == [final.name]  # no staging, lock or copy left
    return writer, final


@pytest.mark.slow
def test_a_writer_killed_before_publishing_leaves_nothing_and_a_retry_completes(tmp_path,
                                                                                 tiny_params):
    writer, final = _writer_and_retry(tmp_path, tiny_params, stop=False)
    assert writer.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_a_stopped_writer_that_wakes_after_its_claim_was_taken_replaces_nothing(tmp_path,
                                                                                 tiny_params):
    writer, final = _writer_and_retry(tmp_path, tiny_params, stop=True)
    published = {n: (final / n).read_bytes() for n in os.listdir(final)}
    writer.send_signal(signal.SIGCONT)
    out, _ = writer.communicate("\n", timeout=300)  # it goes on to publish its own copy
    assert writer.returncode == 0 and "done ok 1" in out  # found the cell done: reused
    assert {n: (final / n).read_bytes() for n in os.listdir(final)} == published  # untouched
    assert sorted(os.listdir(final.parent)) == [final.name]


# --- (d) a failure next to a success on one cell ------------------------------------------

def _stage(final: Path, content: bytes | None) -> Path:
    """A staged cell: good (every file holding ``content``) or, for None, a failure record."""
    work = files.staging_dir(final)
    record: dict = {"status": "failed", "reason": "boom"}
    if content is not None:
        for name in layout.REQUIRED[:-1]:
            (work / name).write_bytes(content)
        record = {"status": "ok", "files": folders.checksums(work, layout.REQUIRED[:-1])}
    files.atomic_write_json(work / "cell.json", record)
    return work


@pytest.mark.parametrize("order", ["good-first", "failure-first"])
def test_a_failure_never_replaces_a_good_cell_in_either_order(tmp_path, order):
    final = tmp_path / "c" / "v"
    good, bad = _stage(final, b"good"), _stage(final, None)
    first, second = (good, bad) if order == "good-first" else (bad, good)
    folders.publish(first, final)
    folders.publish(second, final)
    assert folders.inspect(final).status == "done"
    assert (final / "embeddings.parquet").read_bytes() == b"good"
    assert sorted(os.listdir(tmp_path / "c")) == ["v"]


PUBLISHER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pipeline.runtime.store import files, folders
    from tests.runtime.test_store_races import _stage
    root, content, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(rounds):
        final = root / f"cell{i}" / "v"
        work = _stage(final, None if content == "-" else content.encode())
        print("ready", flush=True)
        while not (root / f"go{i}").exists():
            pass
        print(int(folders.publish(work, final).kept), flush=True)
""")


def test_concurrent_failures_and_successes_keep_the_first_good_cell(tmp_path):
    """Four writers of one cell (two good, two failures) publish at the same moment, released
    together, five times over: each time the cell is one good writer's, the one that says it
    published; the other good writer says it reused it; nothing else is left."""
    rounds, contents = 5, ["a", "-", "b", "-"]
    procs = [subprocess.Popen([sys.executable, "-c", PUBLISHER, str(tmp_path), c, str(rounds)],
                              stdout=subprocess.PIPE, text=True, env=_env()) for c in contents]
    try:
        for i in range(rounds):
            for p in procs:
                assert p.stdout.readline().strip() == "ready"
            (tmp_path / f"go{i}").touch()
            said = [int(p.stdout.readline()) for p in procs]
            kept = {c: k for c, k in zip(contents, said, strict=True) if c != "-"}
            final = tmp_path / f"cell{i}" / "v"
            assert folders.inspect(final).status == "done", f"round {i}"
            winner = (final / "embeddings.parquet").read_bytes().decode()
            assert kept == {w: int(w != winner) for w in ("a", "b")}, f"round {i}: {kept}"
            assert sorted(os.listdir(final.parent)) == ["v"], f"round {i}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=60)


# --- (e) staging folders are each writer's own -------------------------------------------

def test_a_live_writers_staging_survives_another_writers_staging(tmp_path):
    final = tmp_path / "c" / "v"
    live = files.staging_dir(final)
    (live / "embeddings.parquet").write_bytes(b"half")
    other = files.staging_dir(final)
    assert other != live and (live / "embeddings.parquet").read_bytes() == b"half"
    folders.publish(_stage(final, b"done"), final)  # a third writer publishes meanwhile
    assert live.is_dir() and other.is_dir()


def test_remove_staging_takes_only_that_cells_staging(tmp_path):
    final = tmp_path / "c" / "v"
    folders.publish(_stage(final, b"done"), final)
    left = [files.staging_dir(final), files.staging_dir(final)]
    (tmp_path / "c" / ".v.123.old").mkdir()  # a set-aside folder of a killed publisher
    neighbour = files.staging_dir(tmp_path / "c" / "v2")
    assert sorted(files.staging_of(final)) == sorted([*left, tmp_path / "c" / ".v.123.old"])
    assert files.remove_staging(final) == 3
    assert sorted(os.listdir(tmp_path / "c")) == sorted(["v", neighbour.name])
    assert folders.inspect(final).status == "done"


def test_an_object_store_publish_keeps_the_first_good_cell_too(tmp_path):
    """The object-store path (file by file, cell.json last; no lock), run on a file:// URI."""
    final = files.location(f"file://{tmp_path}/c/v")

    def staged(content: bytes | None) -> files.ObjectPath:
        work = final.parent / f".v.{uuid.uuid4().hex}.tmp"  # as staging_dir names it there
        record: dict = {"status": "failed", "reason": "boom"}
        if content is not None:
            for name in layout.REQUIRED[:-1]:
                files.atomic_write_bytes(work / name, content)
            record = {"status": "ok", "files": folders.checksums(work, layout.REQUIRED[:-1])}
        files.atomic_write_json(work / "cell.json", record)
        return work

    failure = staged(None)
    assert not folders._publish_objects(failure, final, files.read_json(failure / "cell.json")).kept
    for content, kept in ((b"good", False), (b"later", True), (None, True)):
        work = staged(content)
        assert folders._publish_objects(work, final,
                                      files.read_json(work / "cell.json")).kept == kept
    assert folders.inspect(final).status == "done"
    assert files.read_bytes(final / "embeddings.parquet") == b"good"
    assert sorted(os.listdir(tmp_path / "c")) == ["v"]
