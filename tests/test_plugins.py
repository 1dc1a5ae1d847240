"""pipeline.plugins: a module name or a .py file, imported once; errors name plugins[i]."""

from __future__ import annotations

import sys

import pytest

from pipeline.losses import LOSSES, LossSpec
from pipeline.plugins import load_plugins

PLUGIN = """
from pipeline.losses import LOSSES, LossSpec
from pipeline.losses.infonce import _infonce
import builtins
builtins.cbench_plugin_runs = getattr(builtins, "cbench_plugin_runs", 0) + 1
LOSSES[{name!r}] = LossSpec(fn=_infonce)
"""


@pytest.fixture
def registry():
    """The loss registry and the import state as they were before the test."""
    import builtins

    before, modules = dict(LOSSES), set(sys.modules)
    builtins.cbench_plugin_runs = 0  # type: ignore[attr-defined]
    yield builtins
    LOSSES.clear()
    LOSSES.update(before)
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    del builtins.cbench_plugin_runs  # type: ignore[attr-defined]


def test_a_file_registers_its_losses_once(tmp_path, registry):
    path = tmp_path / "my_losses.py"
    path.write_text(PLUGIN.format(name="from_file"))
    load_plugins([str(path)])
    load_plugins([str(path)])  # a second load (another stage in the process) imports nothing
    assert isinstance(LOSSES["from_file"], LossSpec) and registry.cbench_plugin_runs == 1


def test_a_module_name_is_imported(tmp_path, registry, monkeypatch):
    (tmp_path / "cbench_test_plugin_mod.py").write_text(PLUGIN.format(name="from_module"))
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugins(["cbench_test_plugin_mod"])
    assert "from_module" in LOSSES


def test_errors_name_the_entry_and_the_cause(tmp_path, registry):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no GPU here')\n")
    with pytest.raises(ValueError, match=r"plugins\[1\] = '.*broken.py': cannot import it: "
                                          r"RuntimeError: no GPU here"):
        load_plugins(["json", str(broken)])  # the second entry fails
    broken.write_text(PLUGIN.format(name="fixed"))
    load_plugins([str(broken)])  # the failed import left nothing behind: it runs again
    assert "fixed" in LOSSES
    with pytest.raises(ValueError, match=r"plugins\[0\] = 'no_such_module_xyz': cannot import "
                                          r"it: ModuleNotFoundError"):
        load_plugins(["no_such_module_xyz"])
    with pytest.raises(ValueError, match=r"plugins\[0\] = '.*missing.py': plugin file not "
                                          r"found at .*missing.py"):
        load_plugins([str(tmp_path / "missing.py")])
