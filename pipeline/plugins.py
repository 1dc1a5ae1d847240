"""Bring-your-own losses: modules named in ``params.plugins`` that add entries to the registries.

A plugin is a module name (``mypkg.my_losses``) or a path to a ``.py`` file (a relative one
from the working folder); importing it registers its losses (``pipeline.losses.LOSSES[name] =
LossSpec(...)``). The config layer imports plugins before it checks names, and every Ray worker
imports them before it trains a cell. Every plugin file is checked before any is imported: a
missing or unreadable one is named with its path (:func:`file_problems`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from pipeline.readable import unreadable

FILE_MODULE_PREFIX = "cbench_plugin_"  # sys.modules name of a plugin given as a .py file


def _load_file(path: Path) -> None:
    name = FILE_MODULE_PREFIX + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def file_problems(plugins: Sequence[str]) -> list[str]:
    """One line per plugin file (``.py``) that is missing or unreadable: the key, the value, the
    path it was looked for at and what to do."""
    lines = []
    for i, plugin in enumerate(plugins):
        path = Path(plugin).absolute()
        why = unreadable(path, "file") if plugin.endswith(".py") else ""
        if why:
            lines.append(f"plugins[{i}] = {plugin!r}: plugin file {why} at {path}; a relative "
                         f"path is taken from the working folder ({Path.cwd()}): give the "
                         "file's absolute path, or put the file there")
    return lines


def load_plugins(plugins: Sequence[str]) -> None:
    """Import each plugin once; errors name ``plugins[i]``, the value and the cause (every
    missing or unreadable plugin file at once, before any import)."""
    problems = file_problems(plugins)
    if problems:
        raise ValueError("\n".join(problems))
    for i, plugin in enumerate(plugins):
        try:
            if plugin.endswith(".py"):
                _load_file(Path(plugin))
            else:
                importlib.import_module(plugin)
        except Exception as err:  # noqa: BLE001 — any import failure becomes a params error
            raise ValueError(f"plugins[{i}] = {plugin!r}: cannot import it: "
                             f"{type(err).__name__}: {err}") from None
