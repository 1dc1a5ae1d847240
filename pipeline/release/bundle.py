"""``cbench release NAME``: the workspace's results as an immutable, checkable bundle.

``releases/NAME/`` holds what a paper cites: every file of ``reports/`` (the leaderboards in
Markdown, LaTeX, HTML and CSV, ``cells.csv``, ``ranks.csv``, ``pairs.csv``, the figures),
``results.json`` (:mod:`pipeline.release.results`), the resolved params, ``REPRODUCE.md`` (the
commands and the agreement to expect) and ``MANIFEST.json``: the git commit, the profile, the
library versions, the hardware, the cell counts and the SHA-256 of every other file.
``releases/NAME.tar.gz`` is the same folder as one file (sorted members, fixed owner and times,
so the same folder packs to the same bytes).

A release is written once: an existing NAME (folder or archive) is refused before anything is
read, and the folder appears whole or not at all (it is built beside and renamed into place).
:func:`check_release` recomputes every digest and validates ``results.json``; a changed, missing
or added file is reported by name.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import platform
import re
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.release.results import results_document, validate
from pipeline.runtime.cells.verify import TOLERANCES
from pipeline.runtime.store.files import file_sha256 as sha256

FORMAT = "contrastive-bench/release@1"
MANIFEST = "MANIFEST.json"
RESULTS = "results.json"
REPRODUCE = "REPRODUCE.md"
PARAMS = "params.resolved.yaml"
REPORTS = "reports"
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
LIBRARIES = ("torch", "torchvision", "ray", "dask", "distributed", "mlflow", "dvc", "numpy",
             "scipy", "pandas", "pyarrow", "scikit-learn", "statsmodels")


class ReleaseError(ValueError):
    """A release that cannot be written or read: the message names what and why."""


@dataclass(frozen=True)
class Release:
    """A release folder read back: its manifest, its cells (``results.json``) and where it is."""

    name: str
    path: Path
    manifest: dict[str, Any]
    results: dict[str, Any]

    @property
    def cells(self) -> list[dict[str, Any]]:
        return list(self.results["cells"])


def check_name(name: str) -> str:
    """``name`` when it is a valid release name, else a :class:`ReleaseError` saying the rule."""
    if not NAME_RULE.fullmatch(name):
        raise ReleaseError(f"release name {name!r}: must be 1 to 100 characters of letters, "
                           "digits, '.', '_' or '-', starting with a letter or digit "
                           "(e.g. v1.0 or 2026-12-mnist)")
    return name


def read_table(folder: Path, name: str) -> pd.DataFrame:
    """``folder/name`` (a CSV of a report), or an empty frame when the run wrote none."""
    path = folder / name
    return pd.read_csv(path) if path.is_file() else pd.DataFrame()


def _files(folder: Path) -> list[str]:
    """Every file under ``folder``, as sorted POSIX paths relative to it."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _libraries() -> dict[str, str]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _profile(params_text: str) -> str | None:
    """The profile named in the resolved params' header (``# generated from params.yaml +
    profiles/x.yaml``), if any."""
    first = params_text.splitlines()[0] if params_text else ""
    found = re.match(r"# generated from \S+ \+ ([^;\s]+)", first)
    return found.group(1) if found else None


def _reproduce(name: str, commit: str, profile: str | None) -> str:
    run = f"make run PROFILE={profile}" if profile else "make run"
    rows = "\n".join(f"| {key} | {tol.what} | {tol.atol:g} | {tol.rtol:g} |"
                     for key, tol in TOLERANCES.items())
    dirty = ("\nThe release was made from a working tree with uncommitted changes "
             f"({commit}): the commit alone does not hold its code.\n"
             if commit.endswith("-dirty") or commit == "unknown" else "")
    return f"""# Reproducing release {name}

The results of this release came from commit `{commit}`{f' with the profile `{profile}`'
                                                         if profile else ''}.
{dirty}
```
git clone <this project's repository> contrastive-bench
cd contrastive-bench
git checkout {commit.removesuffix('-dirty')}
{run}
cbench verify --sample 8     # retrain 8 cells from their records and compare
```

`{PARAMS}` in this release is the exact configuration the cells were resolved from; the run
above resolves the same one (the resolve stage writes it again: compare the two files).

## What agreement to expect

On the machine that trained the cells, a retrained cell agrees to rounding. On another machine,
BLAS kernels differ (MKL on Intel and AMD CPUs, cuBLAS on GPUs), so each float agrees to about
1e-6 relative per operation and drifts over a training. `cbench verify` counts a cell as
reproduced when every quantity below agrees within |retrained − stored| ≤ atol + rtol·|stored|:

| quantity | what | atol | rtol |
| --- | --- | --- | --- |
{rows}

Leaderboard values are means over seeds with their intervals over seeds: a rerun on other
hardware moves them by far less than those intervals. `cbench diff releases/{name} .` after
the run lists every number that moved beyond its interval.
"""


def _manifest(name: str, folder: Path, commit: str, profile: str | None,
              cells: pd.DataFrame) -> dict[str, Any]:
    status = cells["status"].fillna("pending") if "status" in cells else pd.Series([], dtype=str)
    hardware = sorted({str(h) for h in cells.get("hardware", pd.Series([], dtype=str)).dropna()})
    return {
        "format": FORMAT, "name": name,
        "created": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "git_commit": commit, "profile": profile, "params": PARAMS,
        "python": platform.python_version(), "libraries": _libraries(),
        "hardware": {"released_on": f"{platform.machine()} {platform.processor()}".strip(),
                     "cpus": os.cpu_count(), "cells_trained_on": hardware},
        "cells": {"total": int(len(cells)), **{str(k): int(v)
                                               for k, v in status.value_counts().items()}},
        "files": {rel: sha256(folder / rel) for rel in _files(folder) if rel != MANIFEST},
    }


def _tar_gz(folder: Path, archive: Path) -> None:
    """``folder`` as a gzip'd tar whose bytes depend only on the files (sorted, mtime 0)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in _files(folder):
            info = tarfile.TarInfo(f"{folder.name}/{rel}")
            data = (folder / rel).read_bytes()
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    with archive.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(buffer.getvalue())


def write_release(name: str, workspace: Path, releases: Path, commit: str) -> Path:
    """Write ``releases/name/`` and ``releases/name.tar.gz`` from ``workspace`` (a finished
    run: ``reports/cells.csv`` present); returns the folder. Refuses an existing name and a
    workspace without a report, before writing anything."""
    check_name(name)
    final, archive = releases / name, releases / f"{name}.tar.gz"
    for existing in (final, archive):
        if existing.exists():
            raise ReleaseError(f"release {name!r}: {existing} exists, and a release is never "
                               "overwritten; choose another name")
    reports = workspace / REPORTS
    if not (reports / "cells.csv").is_file():
        raise ReleaseError(f"workspace {workspace}: no {REPORTS}/cells.csv; run the pipeline "
                           "(make run) before releasing it")
    params = workspace / PARAMS
    params_text = params.read_text(encoding="utf-8") if params.is_file() else ""
    cells = pd.read_csv(reports / "cells.csv")
    document = results_document(cells, name)
    problems = validate(document)
    if problems:  # a bug of this project, not of the user's run: say so
        raise ReleaseError("results.json does not match its schema: " + "; ".join(problems[:5]))
    releases.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=releases)) / name
    try:
        shutil.copytree(reports, work / REPORTS)
        if params_text:
            (work / PARAMS).write_text(params_text, encoding="utf-8")
        (work / RESULTS).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n",
                                    encoding="utf-8")
        profile = _profile(params_text)
        (work / REPRODUCE).write_text(_reproduce(name, commit, profile), encoding="utf-8")
        manifest = _manifest(name, work, commit, profile, cells)
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                                     encoding="utf-8")
        _tar_gz(work, work.parent / archive.name)
        os.rename(work, final)  # fails if another writer got there first: nothing is replaced
        os.rename(work.parent / archive.name, archive)
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)
    return final


def _json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        raise ReleaseError(f"{path}: cannot be read as JSON ({err})") from err


def read_release(path: Path) -> Release:
    """The release at ``path`` (a release folder)."""
    if not (path / MANIFEST).is_file():
        raise ReleaseError(f"{path}: not a release (no {MANIFEST}); releases are written by "
                           "cbench release NAME")
    manifest = _json(path / MANIFEST)
    return Release(str(manifest.get("name", path.name)), path, manifest, _json(path / RESULTS))


def check_release(path: Path) -> list[str]:
    """Every way the release at ``path`` differs from its manifest (a file changed, missing or
    added) and every way its ``results.json`` breaks the schema; empty when intact."""
    if not (path / MANIFEST).is_file():
        raise ReleaseError(f"{path}: not a release (no {MANIFEST})")
    listed: Mapping[str, str] = _json(path / MANIFEST).get("files", {})
    present = {rel for rel in _files(path) if rel != MANIFEST}
    problems = [f"{rel}: missing (listed in {MANIFEST})" for rel in sorted(set(listed) - present)]
    problems += [f"{rel}: not in {MANIFEST} (added after the release)"
                 for rel in sorted(present - set(listed))]
    problems += [f"{rel}: changed (SHA-256 {sha256(path / rel)[:12]}…, the manifest says "
                 f"{listed[rel][:12]}…)" for rel in sorted(present & set(listed))
                 if sha256(path / rel) != listed[rel]]
    if RESULTS in present:
        try:
            problems += [f"{RESULTS}: {p}" for p in validate(_json(path / RESULTS))]
        except ReleaseError as err:
            problems.append(f"{RESULTS}: {err}")
    return problems
