"""Code fingerprints: the normalised token hash (comments, docstrings and layout do not count;
code does; Python 3.11, 3.12 and 3.13 agree), and what a cell's fingerprint holds.

Which code a cell's fingerprint must cover is checked from the running code and generated edits
in ``test_fingerprint_completeness.py``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import fingerprint as fp
from pipeline.config import expand, from_mapping

ROOT = Path(__file__).resolve().parents[1]


def test_comments_docstrings_and_layout_do_not_count():
    a = 'def f(x, y):\n    """Doc."""\n    return g(x + 1, [y, 2], {"k": y})  # one\n'
    b = ("def f(x,\n      y,):\n\n    # a comment\n    '''Another doc.'''\n"
         "    return g(x\n             + 1, [y, 2,],\n             {'k': y,},)\n")
    c = "def f(x, y):\n  return \\\n    g(x+1,[y,2],{'k':y})\n"
    assert fp.source_hash(a) == fp.source_hash(b) == fp.source_hash(c)
    # statements split by ";" or by lines are the same statements
    assert fp.source_hash("x = 1; y = 2\n") == fp.source_hash("x = 1\ny = 2\n")
    # a docstring counts nowhere, a module's included, a class's and a nested function's too
    assert fp.source_hash('"""M."""\nclass A:\n    """C."""\n    def f(self):\n        """F."""\n'
                          '        return 1\n') == fp.source_hash(
        "class A:\n    def f(self):\n        return 1\n")


@pytest.mark.parametrize("a, b", [
    ("x + 1", "x + 2"),
    ("(a,)", "(a)"),  # a tuple: its comma is code
    ("f\n(a,)", "f\n(a)"),  # a statement, then a tuple (not a call of f)
    ("x[a,]", "x[a]"),  # a tuple index
    ("1", "1.0"),
    ("'a'", "b'a'"),
    ('f"{x}"', 'f"{y}"'),
    ('f"{x!r}"', 'f"{x}"'),
    ("f(a)", "f(a=a)"),
    ("if a:\n    b\nc", "if a:\n    b\n    c"),  # indentation is structure
    ("x = 'doc'", "x = 'dot'"),  # a string that is not a docstring is code
])
def test_any_code_change_counts(a, b):
    assert fp.source_hash(a) != fp.source_hash(b)


FIXED = '''\
"""A module docstring (not code)."""
import functools
from typing import Callable


@functools.cache
@staticmethod
def greet(name: str, width: int = 8, *args: int, **kw: dict[str, int]) -> str:
    """A function docstring."""
    inner = f"{name!r:>{width}}"
    nested = f"{f'{name}'.upper()} {width:#x} {{braces}}"
    scale: Callable[[int], int] = lambda x, y=2: x * y  # a comment
    return f"""{inner}
{nested} {scale(3)}""" + 'tail' + r"\\d"


class Shape(tuple[int, int]):
    """A class docstring."""

    sides: int = 0b101

    def area(self) -> float:
        return self[0] * self[1] * 1e-3 if self else -1j.imag
'''
# Recorded under Python 3.11.7, 3.12.1 and 3.13.0: a change of the normalisation changes it, and
# with it every cell's version (the store's cells would all go stale: do it on purpose only).
FIXED_DIGEST = "e9d4282e2915b269cb7115a355111e72b6383384eb18a0af1b14ddceef45b826"


def test_the_normalisation_is_the_recorded_one():
    assert fp.source_hash(FIXED) == FIXED_DIGEST
    tokens = fp.normalised_tokens(FIXED)
    assert 'Ff"{name!r:>{width}}"' in tokens  # an f-string is one token, its source text
    assert not any("docstring" in t for t in tokens)


# Hashes every module of the project with pipeline/fingerprint/units.py loaded from its file alone
# (pure stdlib: the other interpreters have none of the project's dependencies).
HASH_ALL = r"""
import importlib.util, json, sys
from pathlib import Path
root = Path(sys.argv[1])
spec = importlib.util.spec_from_file_location("fp_units_alone",
                                              root / "pipeline" / "fingerprint" / "units.py")
units = importlib.util.module_from_spec(spec)
sys.modules["fp_units_alone"] = units
spec.loader.exec_module(units)
out = {}
for folder in ("pipeline", "stages", "bench"):
    for path in sorted((root / folder).rglob("*.py")):
        rel = path.relative_to(root)
        info = units.analyse(".".join(rel.with_suffix("").parts), path, path.read_text("utf-8"))
        out[str(rel)] = [info.digest, {k: u.hash for k, u in info.units.items()}]
print(json.dumps({"version": list(sys.version_info[:2]), "hashes": out}))
"""


def _interpreter(version: str) -> str | None:
    """A Python ``version`` that runs here: pyenv's, else ``python<version>`` on the PATH."""
    candidates = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python"))
    candidates += [p for p in [shutil.which(f"python{version}")] if p]
    for path in candidates:
        try:
            out = subprocess.run([path, "-c", "import sys; print(*sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.split() == version.split("."):
            return path
    return None


def _hash_all(python: str) -> dict:
    out = subprocess.run([python, "-c", HASH_ALL, str(ROOT)], capture_output=True, text=True,
                         check=True, timeout=300, env={"PATH": os.environ.get("PATH", "")})
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def here() -> dict:
    return _hash_all(sys.executable)


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_every_module_hashes_the_same_under_each_python(version, here):
    if tuple(here["version"]) == tuple(int(v) for v in version.split(".")):
        pytest.skip(f"Python {version} is the one running the tests")
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter on this machine (python{version} or pyenv)")
    there = _hash_all(python)
    assert there["version"] == [int(v) for v in version.split(".")]
    assert len(here["hashes"]) > 100
    differ = [f for f in here["hashes"] if here["hashes"][f] != there["hashes"].get(f)]
    assert not differ, f"Python {version} hashes these files otherwise: {differ}"


def test_cells_of_different_losses_have_different_code(tiny_params):
    tiny_params["grid"]["loss"] = ["infonce", "dcl", "weince"]
    cells = expand(from_mapping(tiny_params))
    prints = {c.loss: fp.code_fingerprint(c) for c in cells}
    assert len({p.digest for p in prints.values()}) == 3
    assert "pipeline.losses.dcl:dcl" in prints["dcl"].functions
    assert "pipeline.losses.dcl:dcl" not in prints["infonce"].functions
    assert "pipeline.losses.dcl:_dcl" in prints["dcl"].functions
    assert "pipeline.train:train_cell" in prints["infonce"].functions
    assert "pipeline.runtime.cells.one_cell:_write_views" in prints["infonce"].functions
    # what differs is named: the modules, and the units
    changed = prints["dcl"].changed(prints["infonce"].as_record())
    assert {"pipeline.losses.dcl", "pipeline.losses.infonce",
            "pipeline.losses.registry"} <= set(changed)
    assert "pipeline.train" not in changed
    units = prints["dcl"].changed_units(prints["infonce"].as_record())
    assert "pipeline.losses.registry:LOSSES['dcl']" in units  # the entry's own fields
    assert not [u for u in units if u.startswith("pipeline.train:")]
    record = prints["dcl"].as_record()
    assert json.loads(json.dumps(record)) == record and record["digest"] == prints["dcl"].digest
    assert prints["dcl"].changed(record) == []


def test_a_record_of_the_old_whole_module_form_is_changed_not_an_error(tiny_params):
    cell = expand(from_mapping(tiny_params))[0]
    old = {"digest": "0123456789ab", "modules": {"pipeline.train": "x" * 64},
           "functions": {"loss:infonce": "y" * 64}}
    changed = fp.code_fingerprint(cell).changed(old)
    assert "pipeline.train" in changed and "pipeline.losses.infonce" in changed


def test_a_thousand_cells_are_fingerprinted_once_per_entry(tiny_params):
    tiny_params["grid"].update(loss=["infonce", "dcl", "weince", "synco"], k=[4, 8, 16, 32, 64],
                               tau=[0.1, 0.2, 0.3, 0.5, 1.0], embed_dim=[4, 8],
                               seed=[0, 1, 2, 3, 4])
    tiny_params["stats"]["projections"] = 4
    cells = expand(from_mapping(tiny_params))
    assert len(cells) == 1000
    prints = [fp.code_fingerprint(c) for c in cells]
    assert len({p.digest for p in prints}) == 4  # one per loss: the rest of the grid is config
    assert len({id(p) for p in prints}) == 4  # computed once per distinct code path


def test_function_hash_and_object_keys_follow_closures_and_partials():
    import functools

    from pipeline.encoders.registry import ENCODERS
    from pipeline.encoders.simple import mlp

    keys = fp.object_keys(ENCODERS["mlp"].build)  # _flat(mlp)'s wrapped: _flat, and mlp inside
    assert keys == ["pipeline.encoders.registry:_flat", "pipeline.encoders.simple:mlp"]
    assert fp.object_keys(functools.partial(mlp, hidden=[4])) == ["pipeline.encoders.simple:mlp"]
    assert fp.function_hash(mlp) == fp.module_units("pipeline.encoders.simple")[
        "pipeline.encoders.simple:mlp"].hash
    assert fp.function_hash(len) == ""
