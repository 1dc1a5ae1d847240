"""The code a stage runs, as one digest: how DVC sees a code change without a column per file.

A stage's code is every file of the project (``pipeline/``, ``stages/``) that running
``python -m stages.<stage>`` imports, transitively, as Python runs them: the imports at the top
of each module and those inside functions (they run when called), and the packages above every
module imported. :func:`code_digest` hashes those files' paths and bytes; ``resolve`` folds it
into the stage's digest in ``params.tracked.yaml`` (:mod:`pipeline.config.tracked`), which the
stage declares in ``dvc.yaml``. So an edit reruns exactly the stages that import the edited file,
as a dependency on the file would, and ``dvc exp show`` shows one column per stage instead of one
per module. ``resolve`` runs on every ``dvc repro`` (``always_changed``), so the digests are
always those of the checkout.

Files are found by path from the package's own location, not by importing them: the digest is
the code on disk, wherever the stage runs (a suite's task folder runs the project's code).
Standard library only.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

import pipeline

PROJECT = ("pipeline", "stages")
ROOT = Path(pipeline.__file__).resolve().parent.parent  # the folder holding pipeline/, stages/


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The source file of the project module ``name`` under ``root``, or None (not ours)."""
    if name.split(".")[0] not in PROJECT:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path, package: str) -> tuple[str, ...]:
    """The modules the file at ``path`` names in its imports (``package``: its own package, for
    relative imports); ``from a import b`` names both ``a`` and ``a.b`` (b may be a module)."""
    stat = path.stat()
    return _parsed_imports(path, package, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4096)
def _parsed_imports(path: Path, package: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """:func:`_imports` of one version of the file (the stat keys the cache: every stage's
    digest parses each file once)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return tuple(names)


def imported_files(module: str, root: Path = ROOT) -> list[Path]:
    """Every project file that running ``module`` imports (see the module docstring), sorted."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name, root)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo += [n for n in _imports(path, package) if n.split(".")[0] in PROJECT]
    return sorted(set(seen.values()))


def code_digest(module: str, root: Path = ROOT) -> str:
    """A digest of the files ``module`` imports: their paths under ``root`` and their bytes."""
    h = hashlib.sha256()
    for path in imported_files(module, root):
        stat = path.stat()
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(_file_hash(path, stat.st_mtime_ns, stat.st_size))
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=4096)
def _file_hash(path: Path, mtime_ns: int, size: int) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()
