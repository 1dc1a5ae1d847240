"""A stage's memo: a rerun whose inputs are what its last successful run saw does nothing.

``resolve`` and ``train`` are ``always_changed`` in ``dvc.yaml`` (they read what DVC does not
track: the profile, the cell store), so every ``dvc repro`` runs them. Done in full, each
imports torch and the registries (validation, code fingerprints) and checks every cell's
checksums: seconds per stage before it finds that nothing changed. A memo keeps, in
``.cbench/memo/<stage>.json`` of the stage's working folder:

- ``key``: a SHA-256 over what the run read, taken at its *start*, before any work (a file
  edited while the run goes on is not what it read): the named input files' bytes, the
  project's code (every ``.py`` file of ``pipeline/`` and ``stages/``), the versions of the
  libraries that compute, the Python, the host, and the environment the stage reads (the
  ``CBENCH_*``, ``MLFLOW_*``, ``RAY_*`` variables and :data:`ENV_NAMES`, less ``CBENCH_WARM*``:
  a stage run warm or cold is the same stage). A stage saves the key it took at its start, and
  only when the run succeeded;
- ``files``: the SHA-256 of the files the run wrote in the workspace (its outputs: DVC moves
  them into its cache and links them back after the stage, which changes their times, not
  their bytes);
- ``folders`` and ``watched``: the size and modification time of every file under the folders
  it relied on (the grid's cells in the store), as DVC's own cache and ``make`` trust a file
  whose size and time are unchanged: for a folder the run wrote, as it left it; for the others,
  as the run saw them at its start (:func:`snapshot`), so a cell changed during the run is
  changed for the next one;
- ``databases``: the identity of each SQLite database the stage keeps in step (the MLflow
  tracking store): :func:`sqlite_identity`, its file's device and inode and a digest of its
  runs and experiments read with the stdlib ``sqlite3``, so a database replaced, emptied or
  edited since is not the one recorded;
- ``info``: what the stage prints when it skips.

:func:`fresh` returns ``info`` only when the key is the same, every file has its bytes, every
file under the folders is the same file with its size and time, and every database has its
identity; anything else (no memo, an edit, a deleted or rewritten cell, another database) runs
the stage in full, which writes a new memo when it succeeds. Stdlib only, so a skip costs an
interpreter's start. Grids with plugins (modules outside the project, whose code the key does
not cover), stores that are not local folders and tracking stores that are not local SQLite
files (a server, whose contents a memo cannot check) are never memoised.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import platform
import sqlite3
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pipeline

MEMO_DIR = Path(".cbench") / "memo"
# the libraries whose version changes what a stage computes or how it validates
LIBRARIES = ("torch", "torchvision", "numpy", "scipy", "pandas", "pyarrow", "pydantic", "ray",
             "mlflow", "scikit-learn", "PyYAML")
ENV_PREFIXES = ("CBENCH_", "MLFLOW_", "RAY_")
# the other variables a stage reads: the project's root (relative paths), where the default
# store is ($CBENCH_STORE unset: $XDG_CACHE_HOME, else $HOME/.cache), which GPUs are visible
# (a cell's device "auto") and cuBLAS's workspace (deterministic kernels)
ENV_NAMES = ("DVC_ROOT", "HOME", "XDG_CACHE_HOME", "CUDA_VISIBLE_DEVICES",
             "CUBLAS_WORKSPACE_CONFIG")
# how a stage's process starts (runtime/warm.py: warm or cold), not what it computes
ENV_IGNORED = ("CBENCH_WARM",)


def memo_path(stage: str) -> Path:
    return MEMO_DIR / f"{stage}.json"


def code_files() -> list[Path]:
    """Every ``.py`` file of the project's ``pipeline/`` and ``stages/``, sorted."""
    package = Path(pipeline.__file__).resolve().parent
    roots = (package, package.parent / "stages")
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("*.py"))


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


def key(stage: str, inputs: Iterable[Path | str] = (), extra: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None) -> str:
    """The digest of what a run of ``stage`` reads (see the module docstring). ``inputs``: files
    whose bytes it reads (a missing one counts as missing); ``extra``: other values (JSON);
    ``environ``: the environment the stage started with (default ``os.environ``: Ray, for one,
    sets ``RAY_*`` variables in the driver's own environment while it runs). Take it when the
    run starts, and save that one (:func:`save`)."""
    h = hashlib.sha256(f"cbench-memo/2/{stage}".encode())

    def part(label: str, data: bytes) -> None:
        h.update(f"\0{label}\0{len(data)}\0".encode())
        h.update(data)

    root = Path(pipeline.__file__).resolve().parent.parent
    for path in code_files():
        part(f"code:{path.relative_to(root)}", path.read_bytes())
    for raw in inputs:
        path = Path(raw)
        digest = digest_files([path])[str(path)].encode() if path.is_file() else b"\0missing"
        part(f"input:{path}", digest)
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and not k.startswith(ENV_IGNORED)}
    context = {"env": env, "python": sys.version, "host": platform.node(),
               "machine": platform.machine(), "libraries": {n: _version(n) for n in LIBRARIES},
               "cwd": str(Path.cwd().resolve()), "extra": dict(extra or {})}
    part("context", json.dumps(context, sort_keys=True, default=str).encode())
    return h.hexdigest()


def digest_files(paths: Iterable[Path | str]) -> dict[str, str]:
    """``{path: sha256}``; raises FileNotFoundError for a missing one."""
    out = {}
    for raw in paths:
        h = hashlib.sha256()
        with open(raw, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        out[str(raw)] = h.hexdigest()
    return out


def stat_files(paths: Iterable[Path | str]) -> dict[str, list[int]]:
    """``{path: [size, mtime_ns]}``; raises FileNotFoundError for a missing one."""
    out = {}
    for raw in paths:
        st = os.stat(raw)
        out[str(raw)] = [st.st_size, st.st_mtime_ns]
    return out


def folder_files(folders: Iterable[Path | str]) -> list[Path]:
    """Every regular file under each folder (a cell's files, snapshots included)."""
    return [Path(dirpath) / name for folder in folders
            for dirpath, _, names in os.walk(folder) for name in names]


def snapshot(folder: Path | str) -> dict[str, list[int]]:
    """``{path: [size, mtime_ns]}`` of every file under ``folder`` (its real path: the one
    :func:`save` looks them up by), as a run sees them at its start; empty for a missing one."""
    files = folder_files([os.path.realpath(folder)])
    out = {}
    for path in files:
        try:
            st = os.stat(path)
        except FileNotFoundError:  # removed while we walk: not there at the start
            continue
        out[str(path)] = [st.st_size, st.st_mtime_ns]
    return out


# a file the run did not see at its start: never equal to a stat, so the next run is in full
UNSEEN = [-1, -1]


def sqlite_identity(path: Path | str) -> dict[str, Any] | None:
    """What identifies a local SQLite tracking store: its file (device, inode) and a digest of
    every run (id, experiment, status, lifecycle, end time), every experiment (id, name,
    lifecycle) and the number of tags, read through a read-only connection of the stdlib
    ``sqlite3`` (a write-ahead log's pages included). None when it cannot be read as an MLflow
    store: a missing file, an empty one, another database (the full stage creates or fills it).
    The file's size and time are not part of it: SQLite checkpoints its log into the file when
    the last connection closes, which changes neither runs nor experiments."""
    path = Path(path)
    try:
        st = os.stat(path)
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    except (OSError, sqlite3.Error):
        return None
    try:
        h = hashlib.sha256()
        queries = ("SELECT run_uuid, experiment_id, status, lifecycle_stage, end_time FROM runs "
                   "ORDER BY run_uuid",
                   "SELECT experiment_id, name, lifecycle_stage FROM experiments "
                   "ORDER BY experiment_id",
                   "SELECT count(*) FROM tags")
        for query in queries:
            for row in db.execute(query):
                h.update(json.dumps(row, default=str).encode() + b"\n")
            h.update(b"\0")
        return {"device": st.st_dev, "inode": st.st_ino, "contents": h.hexdigest()}
    except sqlite3.Error:
        return None
    finally:
        db.close()


def fresh(stage: str, memo_key: str) -> dict[str, Any] | None:
    """The memo's ``info`` when the last successful run of ``stage`` read the same inputs
    (``memo_key``), its files have the bytes they had, and the files under its folders are the
    same files with their sizes and times, and its databases have their identity
    (:func:`sqlite_identity`); else None."""
    try:
        memo = json.loads(memo_path(stage).read_text())
        if memo.get("key") != memo_key or digest_files(memo["files"]) != memo["files"]:
            return None
        databases = memo.get("databases", {})
        if any(sqlite_identity(db) != known for db, known in databases.items()):
            return None
        watched = memo["watched"]
        if stat_files(watched) != watched:
            return None
        if {str(p) for p in folder_files(memo["folders"])} != set(watched):  # a file appeared
            return None
        return dict(memo.get("info", {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(stage: str, memo_key: str, files: Iterable[Path | str] = (),
         folders: Iterable[Path | str] = (), info: Mapping[str, Any] | None = None,
         seen: Mapping[str, list[int]] | None = None, written: Iterable[Path | str] = (),
         databases: Iterable[Path | str] = ()) -> bool:
    """Record a successful run: ``memo_key`` (the key taken at its start), the digests of
    ``files``, the size and time of every file under ``folders``, the identity of each of
    ``databases`` and ``info``; whether it was recorded (not when a database cannot be read:
    the memo is forgotten). With ``seen`` (a :func:`snapshot` taken at the run's start), a
    folder not in ``written`` (one the run did not write) is recorded as the run saw it at its
    start, its files that appeared or changed since as never matching, so that a cell changed
    while the run went on makes the next run check it in full."""
    folders = [str(f) for f in folders]
    watched = stat_files(folder_files(folders))
    if seen is not None:
        mine = {os.path.realpath(f) for f in written}
        names = sorted(seen)
        for folder in folders:
            real = os.path.realpath(folder)
            if real in mine:
                continue
            for path in folder_files([folder]):
                watched[str(path)] = list(seen.get(str(Path(real) / path.relative_to(folder)),
                                                   UNSEEN))
            inside = real.rstrip(os.sep) + os.sep  # the files under it at the start
            for name in names[bisect.bisect_left(names, inside):]:
                if not name.startswith(inside):
                    break
                # one removed since the start: missing for the next run
                watched.setdefault(str(Path(folder) / os.path.relpath(name, real)), seen[name])
    identities = {str(db): sqlite_identity(db) for db in databases}
    if any(identity is None for identity in identities.values()):
        forget(stage)
        return False
    memo = {"key": memo_key, "files": digest_files(files), "folders": folders,
            "watched": watched, "databases": identities, "info": dict(info or {})}
    path = memo_path(stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # pipeline.runtime.store.files's
    tmp.write_text(json.dumps(memo, indent=1, sort_keys=True))  # writes import pandas
    os.replace(tmp, path)
    return True


def forget(stage: str) -> None:
    """Remove ``stage``'s memo (a run that failed, or one that cannot be memoised)."""
    memo_path(stage).unlink(missing_ok=True)
