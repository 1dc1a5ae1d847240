"""Where a followed module's source comes from, and every memo built on it.

A module name is a file (:func:`module_path`: the project's, or a plugin's own), the file a text
(on disk, or a test's :func:`source_overrides`), the text an analysis (:func:`info_at`, once per
distinct text). What the other parts work out from the analyses (the references between units,
the units each root reaches, the fingerprints) is memoised here too, so that :func:`forget`, one
function, clears what a changed source makes stale.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pipeline.fingerprint.units import ModuleInfo, Unit, analyse

PROJECT = "pipeline"  # the package whose modules are followed (and plugins' own packages)
PROJECT_DIR = Path(__file__).resolve().parent.parent  # pipeline/


# --- the sources (files, or a test's overrides), their analyses, and the memos on them ----------

_OVERRIDES: dict[Path, str] = {}
_ANALYSED: dict[tuple[Path, str], ModuleInfo] = {}  # (path, sha of the source) -> analysis
_CURRENT: dict[tuple[Path, bool], ModuleInfo] = {}  # (path, as loaded) -> its analysis now
# (module, id of its analysis, unit key) -> the units it references (reach.py)
REFS: dict[tuple[str, int, str], tuple[str, ...]] = {}
EDGES: dict[str, tuple[str, tuple[str, ...]]] = {}  # unit key -> (hash, where it leads: reach.py)
REACH: dict[str, frozenset[str]] = {}  # root -> the units it reaches (reach.py)
CODE_KEYS: dict[tuple[types.CodeType, str], str] = {}  # loaded code -> its unit (never changes)
# entries -> (Fingerprint, the specs: their ids stay theirs) (digest.py)
FINGERPRINTS: dict[Any, tuple[Any, list[Any]]] = {}
_PLUGIN_PACKAGES: set[str] = set()
_PLUGIN_DIRS: set[Path] = set()


@contextlib.contextmanager
def source_overrides(sources: Mapping[Path | str, str]) -> Iterator[None]:
    """Fingerprint as if the files ``sources`` names held the given text (tests: generated
    edits without touching the real files). Runtime objects still map to the loaded code."""
    saved = dict(_OVERRIDES)
    _set_overrides({**saved, **{Path(p).resolve(): s for p, s in sources.items()}})
    try:
        yield
    finally:
        _set_overrides(saved)


def _bindings(path: Path) -> Any:
    name = module_of_path(path)
    if name is None:  # a plugin's file: no cheap way to know its name; assume it changed
        return object()
    info = info_at(name, path)
    return sorted(info.names), sorted((k, v) for k, v in info.imports.items())


def _set_overrides(new: Mapping[Path, str]) -> None:
    """Use ``new``; what was computed from other sources is forgotten (the references between
    units only when an edit changes what a module binds or imports)."""
    paths = {p for p in new.keys() | _OVERRIDES.keys() if new.get(p) != _OVERRIDES.get(p)}
    before = {p: _bindings(p) for p in paths}
    _OVERRIDES.clear()
    _OVERRIDES.update(new)
    forget()
    if any(_bindings(p) != before[p] for p in paths):  # (read from the new sources)
        forget(references=True)


def forget(references: bool = False) -> None:
    """Clear what was computed from the sources now overridden or restored: the analyses in use,
    the fingerprints, what each unit leads to and reaches; with ``references``, the references
    between units too (an edit that changes what a module binds or imports)."""
    if references:
        REFS.clear()
    FINGERPRINTS.clear()
    EDGES.clear()
    REACH.clear()
    for key in [k for k in _CURRENT if not k[1]]:
        del _CURRENT[key]


@functools.cache
def _disk_source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def info_at(name: str, path: Path, loaded: bool = False) -> ModuleInfo:
    """The analysis of module ``name`` at ``path``: of its source now (an override, else the
    file), or ``loaded``: of the file as it was first read (where loaded code's lines point)."""
    info = _CURRENT.get((path, loaded))
    if info is None:
        source = _disk_source(path) if loaded else _OVERRIDES.get(path) or _disk_source(path)
        key = (path, hashlib.sha256(source.encode()).hexdigest())
        if key not in _ANALYSED:
            _ANALYSED[key] = analyse(name, path, source)
        info = _CURRENT[(path, loaded)] = _ANALYSED[key]
    return info


# --- which file a module is ----------------------------------------------------------------------

@functools.cache
def _project_path(name: str) -> Path | None:
    parts = name.split(".")
    base = PROJECT_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate.resolve()
    return None


def _is_project(name: str) -> bool:
    return name == PROJECT or name.startswith(PROJECT + ".")


@functools.cache
def _other_path(name: str) -> Path | None:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None)
    if origin is None and name.split(".")[0] not in sys.stdlib_module_names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
    return Path(origin).resolve() if origin and origin.endswith(".py") else None


def module_path(name: str) -> Path | None:
    """The source file of a followed module (the project's or a plugin's), else None."""
    if _is_project(name):
        return _project_path(name)
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or not (top in _PLUGIN_PACKAGES or _PLUGIN_DIRS):
        return None
    path = _other_path(name)
    if path is None:
        return None
    installed = bool({"site-packages", "dist-packages"} & set(path.parts))
    if top in _PLUGIN_PACKAGES or (not installed and any(d in path.parents for d in _PLUGIN_DIRS)):
        return path  # (beside a file plugin: not what is installed, e.g. a .venv in its folder)
    return None


def module_info(name: str) -> ModuleInfo | None:
    """The analysis of a followed module's source now, else None (not followed code)."""
    path = module_path(name)
    return info_at(name, path) if path is not None else None


def add_plugin(module: str) -> None:
    """Follow a plugin's own modules: its package's, or (a top-level module or a ``.py`` file)
    the modules beside its file."""
    if _is_project(module) or module.split(".")[0] in _PLUGIN_PACKAGES:
        return
    path = _other_path(module)
    if path is None:
        return
    _PLUGIN_PACKAGES.add(module.split(".")[0])
    if "." not in module and not {"site-packages", "dist-packages"} & set(path.parts):
        _PLUGIN_DIRS.add(path.parent)


# --- for tests ----------------------------------------------------------------------------------

def module_units(module: str) -> dict[str, Unit]:
    """The units of a followed module (as its current source has them)."""
    info = module_info(module)
    return dict(info.units) if info is not None else {}


def module_source(module: str) -> tuple[Path, str] | None:
    """(file, source) of a followed module, as the fingerprint reads it now (overrides too)."""
    info = module_info(module)
    return (info.path, info.source) if info is not None else None


def module_of_path(path: Path | str) -> str | None:
    """The dotted name of a project module's file, else None."""
    path = Path(path).resolve()
    if PROJECT_DIR not in path.parents or path.suffix != ".py":
        return None
    parts = [PROJECT, *path.relative_to(PROJECT_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
