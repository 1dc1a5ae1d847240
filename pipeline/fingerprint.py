"""Code fingerprints: which code trained a cell, so that a cell trained by other code is stale.

A cell's fingerprint hashes the code on its training path — the training loop, seeding, the
temperature schedules and the device setup, its loss's module(s) and adapter, its encoder's and
its dataset's modules and their augmentation — each as its syntax tree with docstrings removed,
so comments, docstrings and formatting do not count. The modules a module imports from the
project are followed (the registries and the options declarations are not: they name every
entry, and what an entry computes lives in its own module). A change to one loss's module makes
only that loss's cells stale.

Pure stdlib: module sources are read from the files (nothing is imported to hash it), and each
module is hashed once per process.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import json
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = "pipeline"  # imports of this package are followed
# Every cell's training runs through these (and what they import from the project).
TRAINING_PATH = ("pipeline.train",)
# Not followed through imports: they declare every entry (or their options), computing nothing;
# an entry's own modules are added per cell.
NOT_FOLLOWED = frozenset({"pipeline", "pipeline.losses", "pipeline.encoders", "pipeline.datasets",
                          "pipeline.losses.registry", "pipeline.encoders.registry",
                          "pipeline.datasets.registry", "pipeline.options", "pipeline.grid"})


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def source_hash(source: str) -> str:
    """SHA-256 of the syntax tree of ``source`` without docstrings (comments and layout vanish)."""
    tree = _strip_docstrings(ast.parse(textwrap.dedent(source)))
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


@functools.cache
def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # e.g. ``pipeline.x.name``, a name inside module x
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _project_imports(name: str, tree: ast.AST) -> set[str]:
    """The project modules ``name`` imports (``from pipeline.x import y`` may name a module y)."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, level - 1 packages up
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] == PROJECT and _module_file(m) is not None}


def _is_package(name: str) -> bool:
    path = _module_file(name)
    return path is not None and path.name == "__init__.py"


@functools.cache
def _module(name: str) -> tuple[str, frozenset[str]]:
    """(hash of the module's code, the project modules it imports)."""
    path = _module_file(name)
    if path is None:
        raise ValueError(f"module {name!r}: no Python source file to fingerprint")
    source = path.read_text()
    return source_hash(source), frozenset(_project_imports(name, ast.parse(source)))


def module_hashes(roots: Iterable[str]) -> dict[str, str]:
    """``{module: hash}`` for ``roots`` and the project modules they import, transitively."""
    out: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        digest, imports = _module(name)
        out[name] = digest
        todo += [m for m in imports if m not in NOT_FOLLOWED and m not in out]
    return out


@functools.cache
def function_hash(fn: Callable[..., Any]) -> str:
    """Hash of one function's code (e.g. a registry adapter), or '' when it has no source."""
    try:
        return source_hash(inspect.getsource(fn))
    except (OSError, TypeError, SyntaxError):
        return ""


@dataclass(frozen=True)
class Fingerprint:
    """The code that trains a cell: ``digest`` (12 hex) over ``modules`` and ``functions``."""

    digest: str
    modules: Mapping[str, str]  # module -> hash of its code
    functions: Mapping[str, str]  # qualified name -> hash of its code

    def changed(self, other: Mapping[str, Mapping[str, str]]) -> list[str]:
        """Modules and functions whose code differs from a recorded ``as_record()``."""
        mine = {**self.modules, **self.functions}
        theirs = {**other.get("modules", {}), **other.get("functions", {})}
        return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))

    def as_record(self) -> dict[str, Any]:
        return {"digest": self.digest, "modules": dict(self.modules),
                "functions": dict(self.functions)}


def fingerprint(modules: Iterable[str], functions: Mapping[str, Callable[..., Any]]) -> Fingerprint:
    """The fingerprint of ``modules`` (followed through their project imports) and ``functions``."""
    hashes = module_hashes(modules)
    fns = {name: function_hash(fn) for name, fn in functions.items()}
    blob = json.dumps([hashes, fns], sort_keys=True)
    return Fingerprint(hashlib.sha256(blob.encode()).hexdigest()[:12], hashes, fns)


@functools.cache
def _entry_fingerprint(objective: str, loss: str, arch: str, dataset: str) -> Fingerprint:
    from pipeline.datasets.augment import AUGMENTATIONS
    from pipeline.datasets.registry import DATASETS
    from pipeline.encoders.registry import ENCODERS
    from pipeline.losses.registry import LOSSES

    modules = [*TRAINING_PATH, *ENCODERS[arch].modules]
    functions: dict[str, Callable[..., Any]] = {}
    if objective == "contrastive":
        spec = LOSSES[loss]
        modules += spec.modules or (spec.fn.__module__,)
        functions[f"loss:{loss}"] = spec.fn
    data = DATASETS[dataset]
    modules += [*data.modules, AUGMENTATIONS[data.augmentation].view.__module__]
    return fingerprint(modules, functions)


def code_fingerprint(cell: Any) -> Fingerprint:
    """The fingerprint of the code that trains ``cell`` (a :class:`pipeline.grid.Cell`): the
    training loop and what it imports (seeding, schedules, device setup, negatives), the cell's
    loss (its modules and its adapter), its encoder's and its dataset's modules and views."""
    return _entry_fingerprint(cell.objective, cell.loss, cell.arch, cell.data.name)
