"""A stage's memo: a rerun whose inputs are what its last successful run saw does nothing.

``resolve`` and ``train`` are ``always_changed`` in ``dvc.yaml`` (they read what DVC does not
track: the profile, the cell store), so every ``dvc repro`` runs them. Done in full, each
imports torch and the registries (validation, code fingerprints) and checks every cell's
checksums: seconds per stage before it finds that nothing changed. A memo keeps, in
``.cbench/memo/<stage>.json`` of the stage's working folder:

- ``key``: a SHA-256 over what the run read: the named input files' bytes, the project's code
  (every ``.py`` file of ``pipeline/`` and ``stages/``), the versions of the libraries that
  compute, the Python, the host, and the ``CBENCH_*``, ``MLFLOW_*``, ``RAY_*`` and ``DVC_ROOT``
  environment (less ``CBENCH_WARM*``: a stage run warm or cold is the same stage);
- ``files``: the SHA-256 of the files the run wrote or read in the workspace (its outputs, the
  prepared dataset: DVC moves its outputs into its cache and links them back after the stage,
  which changes their times, not their bytes);
- ``folders``: the size and modification time of every file under the folders it relied on (the
  grid's cells in the store), as DVC's own cache and ``make`` trust a file whose size and time
  are unchanged;
- ``info``: what the stage prints when it skips.

:func:`fresh` returns ``info`` only when the key is the same, every file has its bytes and every
file under the folders is the same file with its size and time; anything else (no memo, an edit,
a deleted or rewritten cell) runs the stage in full, which writes a new memo when it succeeds.
Stdlib only, so a skip costs an interpreter's start. Grids with plugins (modules outside the
project, whose code the key does not cover) and stores that are not local folders are never
memoised.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
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
    sets ``RAY_*`` variables in the driver's own environment while it runs)."""
    h = hashlib.sha256(f"cbench-memo/1/{stage}".encode())

    def part(label: str, data: bytes) -> None:
        h.update(f"\0{label}\0{len(data)}\0".encode())
        h.update(data)

    root = Path(pipeline.__file__).resolve().parent.parent
    for path in code_files():
        part(f"code:{path.relative_to(root)}", path.read_bytes())
    for raw in inputs:
        path = Path(raw)
        part(f"input:{path}", path.read_bytes() if path.is_file() else b"\0missing")
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if (k.startswith(ENV_PREFIXES) or k == "DVC_ROOT") and not k.startswith(ENV_IGNORED)}
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


def fresh(stage: str, memo_key: str) -> dict[str, Any] | None:
    """The memo's ``info`` when the last successful run of ``stage`` read the same inputs
    (``memo_key``), its files have the bytes they had, and the files under its folders are the
    same files with their sizes and times; else None."""
    try:
        memo = json.loads(memo_path(stage).read_text())
        if memo.get("key") != memo_key or digest_files(memo["files"]) != memo["files"]:
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
         folders: Iterable[Path | str] = (), info: Mapping[str, Any] | None = None) -> None:
    """Record a successful run: its key, the digests of ``files``, the size and time of every
    file under ``folders``, and ``info``."""
    folders = [str(f) for f in folders]
    memo = {"key": memo_key, "files": digest_files(files), "folders": folders,
            "watched": stat_files(folder_files(folders)), "info": dict(info or {})}
    path = memo_path(stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # pipeline.runtime.storage's
    tmp.write_text(json.dumps(memo, indent=1, sort_keys=True))  # writes import pandas
    os.replace(tmp, path)


def forget(stage: str) -> None:
    """Remove ``stage``'s memo (a run that failed, or one that cannot be memoised)."""
    memo_path(stage).unlink(missing_ok=True)
