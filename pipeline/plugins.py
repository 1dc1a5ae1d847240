"""Bring-your-own losses: modules named in ``params.plugins`` that add entries to the registries.

A plugin is a module name (``mypkg.my_losses``) or a path to a ``.py`` file; importing it
registers its losses (``pipeline.losses.LOSSES[name] = LossSpec(...)``). The config layer imports
plugins before it checks names, and every Ray worker imports them before it trains a cell.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

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


def load_plugins(plugins: Sequence[str]) -> None:
    """Import each plugin once; errors name ``plugins[i]``, the value and the cause."""
    for i, plugin in enumerate(plugins):
        try:
            if plugin.endswith(".py"):
                _load_file(Path(plugin))
            else:
                importlib.import_module(plugin)
        except Exception as err:  # noqa: BLE001 — any import failure becomes a params error
            raise ValueError(f"plugins[{i}] = {plugin!r}: cannot import it: "
                             f"{type(err).__name__}: {err}") from None
