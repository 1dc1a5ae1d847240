"""Does a cell's code fingerprint cover all the code that makes its files? Checked two ways,
neither from a hand-written list:

(a) every project (and plugin) function that actually runs while a cell of a tiny labelled grid
    is trained and its files written (recorded by a trace hook) is a unit of that cell's
    fingerprint;
(b) for every unit in any of the cells' fingerprints, a generated behaviour-preserving edit (a
    ``None`` statement first in a body, parentheses around a value or a lambda's body) changes
    the fingerprint of exactly the cells whose fingerprint holds that unit — which, with (a),
    includes every cell that ran it;
(c) comments, docstrings and blank lines added everywhere change no cell's fingerprint.

The grid: losses xclr, supcon, infonce, nt_xent and two plugin losses (a package whose loss
calls a helper module of its own package, and a ``.py`` file that imports a module beside it)
× archs mlp, linear on ``gaussian_mixture``.
"""

from __future__ import annotations

import ast
import copy
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from pipeline import fingerprint as fp
from pipeline.config import expand, from_mapping, merge, read_yaml
from pipeline.datasets.registry import load_dataset
from pipeline.losses.registry import LOSSES
from pipeline.plugins import FILE_MODULE_PREFIX, load_plugins
from pipeline.runtime.cells.one_cell import run_cell
from tests.conftest import ROOT, TINY

PLUGIN_PACKAGE = {
    "fpplug/__init__.py": '"""A plugin package for the fingerprint tests."""\n',
    "fpplug/helpers.py": textwrap.dedent('''\
        """A helper of the plugin's own package."""

        SCALE = 1.0


        def scaled(x):
            return SCALE * x
        '''),
    "fpplug/unused.py": "def never_called():\n    return 0\n",
    "fpplug/losses.py": textwrap.dedent('''\
        """A packaged plugin loss: InfoNCE through the package's helper."""

        from fpplug.helpers import scaled
        from pipeline.losses import LOSSES, LossSpec, infonce


        def _pkg_loss(batch, tau, options):
            return scaled(infonce(batch.anchor, batch.positive, batch.negatives, tau))


        LOSSES["fp_pkg_loss"] = LossSpec(fn=_pkg_loss)
        '''),
    "fp_file_helpers.py": "def offset(x):\n    return x + 0.0\n",
    "fp_file_plugin.py": textwrap.dedent('''\
        """A single-file plugin loss: NT-Xent through a module beside the file."""

        from fp_file_helpers import offset

        from pipeline.losses import LOSSES, LossSpec, nt_xent

        LOSSES["fp_file_loss"] = LossSpec(fn=lambda batch, tau, options: offset(
            nt_xent(batch.anchor, batch.positive, tau)), needs_negatives=False)
        '''),
}
LOSS_NAMES = ["xclr", "supcon", "infonce", "nt_xent", "fp_pkg_loss", "fp_file_loss"]


def _params(plugin_file: Path) -> dict:
    params = merge(read_yaml(ROOT / "params.yaml"), copy.deepcopy(TINY))
    params["plugins"] = ["fpplug.losses", str(plugin_file)]
    params["data"].update(name="gaussian_mixture", n_train=256, n_heldout=64,
                          options={"input_dim": 8, "components": 4})
    params["grid"].update(loss=LOSS_NAMES, arch=["mlp", "linear"], k=[4], n=[64], embed_dim=[4],
                          batch_size=[32])
    params["arch_options"] = {**params["arch_options"], "mlp": {"hidden": [8], "bias": True}}
    params["train"]["epochs"] = 1
    params["search"].update(k_eval=8, anchors=16, positives=2, k_sweep=[2, 4], fit_k_min=2)
    return params


class Traced:
    """The grid's cells, their fingerprints, and the units each one ran."""

    def __init__(self, cells, prints, executed, unmapped):
        self.cells = cells
        self.prints = prints
        self.executed = executed  # cell id -> unit keys that ran
        self.unmapped = unmapped  # code objects that ran but belong to no unit

    def label(self, cell_id: str) -> str:
        cell = next(c for c in self.cells if c.cell_id == cell_id)
        return f"{cell.loss}/{cell.arch}"


def _run_traced(cell, dataset, folder: Path, roots: list[Path]) -> tuple[set, object]:
    codes: set = set()

    def trace(frame, event, arg):  # a "call" of each Python frame; None: no line events
        codes.add(frame.f_code)

    previous = sys.gettrace()  # (a debugger's or coverage's, put back afterwards)
    threading.settrace(trace)
    sys.settrace(trace)
    try:
        outcome = run_cell(cell, dataset, folder, {"version": "test"})
    finally:
        sys.settrace(previous)
        threading.settrace(previous)  # type: ignore[arg-type]
    ours = {c for c in codes if any(r in Path(c.co_filename).resolve().parents for r in roots)}
    return ours, outcome


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Traced:
    plugins = tmp_path_factory.mktemp("fpplugins")
    for name, text in PLUGIN_PACKAGE.items():
        (plugins / name).parent.mkdir(parents=True, exist_ok=True)
        (plugins / name).write_text(text)
    saved_losses, saved_modules = dict(LOSSES), set(sys.modules)
    sys.path.insert(0, str(plugins))
    try:
        params = _params(plugins / "fp_file_plugin.py")
        load_plugins(params["plugins"])
        cells = expand(from_mapping(params))
        assert sorted({(c.loss, c.arch) for c in cells}) == sorted(
            (loss, arch) for loss in LOSS_NAMES for arch in ("mlp", "linear"))
        prints = {c.cell_id: fp.code_fingerprint(c) for c in cells}  # (finds the plugins' code)
        d = params["data"]
        dataset = load_dataset(d["name"], d["n_train"], d["n_heldout"], d["seed"], d["options"])
        by_file = {Path(m.__file__).resolve(): name for name, m in list(sys.modules.items())
                   if getattr(m, "__file__", None)}
        executed, unmapped = {}, {}
        out = tmp_path_factory.mktemp("fpcells")
        for cell in cells:
            codes, outcome = _run_traced(cell, dataset, out / cell.cell_id, [fp.PROJECT_DIR,
                                                                            plugins.resolve()])
            assert outcome.status == "ok", outcome.reason
            keys, missing = set(), []
            for code in codes:
                path = Path(code.co_filename).resolve()
                key = fp.unit_of_code(code, by_file.get(path, ""))
                if key is not None:
                    keys.add(key)
                elif code.co_name != "<module>":  # a module's body runs on import, not here
                    missing.append(f"{path.name}:{code.co_firstlineno} {code.co_name}")
            executed[cell.cell_id], unmapped[cell.cell_id] = keys, missing
        yield Traced(cells, prints, executed, unmapped)
    finally:
        sys.path.remove(str(plugins))
        LOSSES.clear()
        LOSSES.update(saved_losses)
        for name in set(sys.modules) - saved_modules:
            if name.startswith(("fpplug", "fp_file_", FILE_MODULE_PREFIX)):
                del sys.modules[name]


def test_every_function_that_runs_is_in_the_cells_fingerprint(traced):
    problems = []
    for cell in traced.cells:
        label, prints = traced.label(cell.cell_id), traced.prints[cell.cell_id]
        ran = traced.executed[cell.cell_id]
        problems += [f"{label}: ran {k}, not fingerprinted"
                     for k in sorted(ran - set(prints.functions))]
        problems += [f"{label}: ran code outside any unit: {m}"
                     for m in traced.unmapped[cell.cell_id]]
    assert not problems, "\n".join(problems)
    ran_somewhere = set().union(*traced.executed.values())
    # the holes the issue found are covered: they ran, and are fingerprinted (checked above)
    for key in ("pipeline.losses.registry:negatives_of", "pipeline.losses.registry:labels_of",
                "pipeline.losses.registry:two_views", "pipeline.losses.xclr:_xclr_graph",
                "pipeline.encoders.registry:_flat", "pipeline.runtime.cells.one_cell:_write_views",
                "pipeline.runtime.cells.one_cell:_write_outputs",
                "pipeline.runtime.cells.one_cell:dead_units",
                "fpplug.helpers:scaled", "fp_file_helpers:offset"):
        assert key in ran_somewhere, key


def test_one_losss_code_is_only_in_its_cells(traced):
    """Granularity: a loss's own code is in its cells' fingerprints only; the training loop and
    the file writing are in every cell's."""
    for cell in traced.cells:
        units = set(traced.prints[cell.cell_id].functions)
        assert {"pipeline.train:train_cell", "pipeline.runtime.cells.one_cell:_write_views",
                "pipeline.encoders.registry:_flat"} <= units
        assert ("pipeline.losses.xclr:_xclr_graph" in units) == (cell.loss == "xclr")
        assert ("pipeline.losses.registry:negatives_of" in units) == (cell.loss == "infonce")
        assert ("pipeline.losses.registry:two_views" in units) == (cell.loss in ("supcon", "xclr"))
        assert ("fpplug.helpers:scaled" in units) == (cell.loss == "fp_pkg_loss")
        assert ("fpplug.helpers:SCALE" in units) == (cell.loss == "fp_pkg_loss")  # a constant read
        assert ("fp_file_helpers:offset" in units) == (cell.loss == "fp_file_loss")
        assert not any(k.startswith("fpplug.unused") for k in units)  # not imported: not followed
        assert ("pipeline.encoders.simple:mlp" in units) == (cell.arch == "mlp")
        assert not any(k.endswith(":LOSSES") or k.endswith(":ENCODERS") for k in units)


# --- generated edits --------------------------------------------------------------------------

def _insert(source: str, edits: list[tuple[int, int, str]]) -> str:
    """``source`` with each text inserted at (line, UTF-8 byte column), as AST positions."""
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    for line, col, text in sorted(edits, reverse=True):
        lines[line - 1] = lines[line - 1][:col] + text.encode() + lines[line - 1][col:]
    return b"".join(lines).decode()


def _starts_line(lines: list[bytes], node: ast.AST) -> bool:
    """Nothing but indentation (or a decorator's ``@``) before ``node`` on its line."""
    return lines[node.lineno - 1][:node.col_offset].strip() in (b"", b"@")


def _none_first(lines: list[bytes], node: ast.AST) -> tuple[int, int, str] | None:
    """Insert a ``None`` statement first in the body of ``node`` (after its docstring): the
    insertion (line, column, text)."""
    body = node.body
    docstring = (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                 and isinstance(body[0].value.value, str)
                 and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))
    if len(body) > docstring:
        target = body[1 if docstring else 0]
        first = min([target, *getattr(target, "decorator_list", [])], key=lambda n: n.lineno)
        if _starts_line(lines, first):
            return first.lineno, 0, " " * target.col_offset + "None\n"
        if not isinstance(target, ast.If | ast.For | ast.While | ast.With | ast.Try
                          | ast.FunctionDef | ast.ClassDef):
            return target.lineno, target.col_offset, "None; "
        return None
    last = body[-1]
    return last.end_lineno + 1, 0, " " * last.col_offset + "None\n"


def _semantic_edit(source: str,
                   unit: fp.Unit) -> tuple[list[tuple[int, int, str]], tuple[int, int]]:
    """A behaviour-preserving edit of ``unit`` that changes its tokens: (insertions, where)."""
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    node = unit.nodes[0]
    if isinstance(node, ast.Lambda):
        value = node.body
    elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr) and node.value:
        value = node.value
    else:
        edit = _none_first(lines, node)
        assert edit is not None, f"{unit.key}: no edit generated"
        return [edit], min(edit[:2], (node.end_lineno, node.end_col_offset))  # inside the unit
    return ([(value.lineno, value.col_offset, "("),
             (value.end_lineno, value.end_col_offset, ")")], (value.lineno, value.col_offset))


def _holds(unit: fp.Unit, where: tuple[int, int]) -> bool:
    for node in unit.nodes:
        first = min([node, *getattr(node, "decorator_list", [])],
                    key=lambda n: (n.lineno, n.col_offset))
        if (first.lineno, first.col_offset) <= where <= (node.end_lineno, node.end_col_offset):
            return True
    return False


def test_each_generated_edit_changes_exactly_the_cells_that_use_it(traced):
    prints = traced.prints
    union = sorted({k for p in prints.values() for k in p.functions})
    units = {}
    for key in union:
        module = key.split(":", 1)[0]
        unit = fp.module_units(module).get(key)
        if unit is not None:  # else a registry entry's data (its fields, not source)
            units[key] = unit
    assert len(units) > 150, len(units)
    problems, edited = [], 0
    for key, unit in units.items():
        source = unit.path.read_text()
        insertions, where = _semantic_edit(source, unit)
        text = _insert(source, insertions)
        module = key.split(":", 1)[0]
        touched = {k for k, u in fp.module_units(module).items() if _holds(u, where)}
        assert key in touched
        with fp.source_overrides({unit.path: text}):
            now = {c.cell_id: fp.code_fingerprint(c) for c in traced.cells}
        edited += 1
        for cell_id, before in prints.items():
            changed = now[cell_id].digest != before.digest
            uses = bool(touched & set(before.functions))
            ran = bool(touched & traced.executed[cell_id])
            if changed != uses or (ran and not changed):
                problems.append(f"edit of {key}: {traced.label(cell_id)} changed={changed}, "
                                f"fingerprint holds it={uses}, ran it={ran}")
            elif changed:
                assert set(now[cell_id].changed(before.as_record())) == {module}
    assert edited == len(units)
    assert not problems, "\n".join(problems[:40])


def _cosmetic_edit(source: str) -> str:
    """Comments before and after statements, blank lines, and words added to every docstring."""
    tree = ast.parse(source)
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    edits = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body:
            continue
        first = body[0]
        if (isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            line = lines[first.lineno - 1]
            col = first.col_offset
            while col < len(line) and line[col:col + 1] not in (b'"', b"'"):
                col += 1
            quote = line[col:col + 1] * 3
            col += 3 if line[col:col + 3] == quote else 1
            edits.append((first.lineno, col, "Edited, only words. "))
        if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and _starts_line(lines, first)):
            edits.append((first.lineno, 0, " " * first.col_offset + "# a comment in the body\n"))
    for stmt in tree.body:
        if stmt.col_offset == 0:
            first = min([stmt, *getattr(stmt, "decorator_list", [])], key=lambda n: n.lineno)
            edits.append((first.lineno, 0, "\n# a comment, and a blank line above\n"))
        end = lines[stmt.end_lineno - 1]
        if (not isinstance(stmt, ast.FunctionDef | ast.ClassDef)
                and not end[stmt.end_col_offset:].strip()):
            edits.append((stmt.end_lineno, stmt.end_col_offset, "  # a trailing comment"))
    return _insert(source, edits)


def test_comments_docstrings_and_blank_lines_change_no_cell(traced):
    modules = {k.split(":", 1)[0] for p in traced.prints.values() for k in p.functions}
    paths = {fp.module_source(m)[0] for m in modules}
    assert len(paths) > 20
    overrides = {}
    for path in paths:
        source = path.read_text()
        text = _cosmetic_edit(source)
        compile(text, str(path), "exec")
        assert text != source
        overrides[path] = text
    with fp.source_overrides(overrides):
        now = {c.cell_id: fp.code_fingerprint(c) for c in traced.cells}
        # what was fingerprinted is the edited text
        assert all(fp.module_source(m)[1] == overrides[fp.module_source(m)[0]] for m in modules)
    for cell_id, before in traced.prints.items():
        assert now[cell_id].functions == before.functions, traced.label(cell_id)
        assert now[cell_id].digest == before.digest
