"""Code fingerprints: comments, docstrings and layout do not count; code does, and only where it
is on a cell's training path."""

from __future__ import annotations

import sys
import textwrap

import pytest

from pipeline import fingerprint as fp
from pipeline.config import expand, from_mapping


def test_comments_docstrings_and_layout_do_not_count():
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    b = "def f(x):\n\n    # a comment\n    return (x\n            + 1)\n"
    c = "def f(x):\n    return x + 2\n"
    assert fp.source_hash(a) == fp.source_hash(b) != fp.source_hash(c)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """A throw-away package ``fpdemo`` (loss modules a and b, a shared helper) on sys.path."""
    pkg = tmp_path / "fpdemo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def h(x):\n    return 2 * x\n")
    (pkg / "a.py").write_text("from fpdemo.helper import h\n\ndef a(x):\n    return h(x)\n")
    (pkg / "b.py").write_text("def b(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(fp, "PROJECT", "fpdemo")
    fp._module.cache_clear()
    fp._module_file.cache_clear()
    yield pkg
    fp._module.cache_clear()
    fp._module_file.cache_clear()
    for name in [m for m in sys.modules if m.startswith("fpdemo")]:
        del sys.modules[name]


def _digests(pkg):
    fp._module.cache_clear()
    return {m: fp.fingerprint([f"fpdemo.{m}"], {}).digest for m in ("a", "b")}


def test_imports_are_followed_and_edits_touch_only_their_dependents(demo):
    assert set(fp.module_hashes(["fpdemo.a"])) == {"fpdemo.a", "fpdemo.helper"}
    before = _digests(demo)
    (demo / "helper.py").write_text(textwrap.dedent('''
        def h(x):
            """Twice x."""  # a docstring and a comment only
            return 2 * x
    '''))
    assert _digests(demo) == before
    (demo / "helper.py").write_text("def h(x):\n    return 3 * x\n")
    after = _digests(demo)
    assert after["a"] != before["a"] and after["b"] == before["b"]


def test_cells_of_different_losses_have_different_code(tiny_params):
    tiny_params["grid"]["loss"] = ["infonce", "dcl", "weince"]
    cells = expand(from_mapping(tiny_params))
    prints = {c.loss: fp.code_fingerprint(c) for c in cells}
    assert len({p.digest for p in prints.values()}) == 3
    assert "pipeline.losses.dcl" in prints["dcl"].modules
    assert "pipeline.losses.dcl" not in prints["infonce"].modules
    assert "pipeline.train" in prints["infonce"].modules
    assert prints["dcl"].changed(prints["infonce"].as_record())  # names what differs


def test_a_thousand_cells_are_fingerprinted_once_per_entry(tiny_params):
    tiny_params["grid"].update(loss=["infonce", "dcl", "weince", "synco"], k=[4, 8, 16, 32, 64],
                               tau=[0.1, 0.2, 0.3, 0.5, 1.0], embed_dim=[4, 8], seed=[0, 1, 2, 3, 4])
    tiny_params["stats"]["projections"] = 4
    cells = expand(from_mapping(tiny_params))
    assert len(cells) == 1000
    digests = {fp.code_fingerprint(c).digest for c in cells}
    assert len(digests) == 4  # one per loss: the rest of the grid is config, not code
