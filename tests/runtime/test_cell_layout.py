"""A cell folder's file names are spelled once, in ``pipeline/runtime/store/layout.py``: no other
module of ``pipeline/`` or ``stages/`` holds a string equal to one of them, or the start of a
snapshot's name (``embeddings_e``), so adding a file to a cell is a change in one place."""

from __future__ import annotations

import ast

from pipeline.runtime.store import layout
from tests.conftest import ROOT

LAYOUT = ROOT / "pipeline" / "runtime" / "store" / "layout.py"
# the start of each snapshot's name: "<stem>_e" before the epoch
PREFIXES = tuple(name.split(".")[0] + "_e" for name in layout.SNAPSHOTTED)


def _strings(tree: ast.AST):
    """(line, text) of every string constant, f-strings' literal parts included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_the_layout_names_what_the_writer_writes():
    assert set(layout.REQUIRED) <= set(layout.FILES) and layout.REQUIRED[-1] == layout.RECORD
    assert len(set(layout.FILES)) == len(layout.FILES)
    assert layout.snapshot(0) == "embeddings_e0000.parquet"
    assert layout.backbone_snapshot(12) == "backbone_e0012.parquet"
    assert {layout.snapshot(3), layout.backbone_snapshot(3)}.isdisjoint(layout.FILES)
    assert layout.snapshot(0).startswith(PREFIXES) and layout.backbone_snapshot(0).startswith(
        PREFIXES)


def test_no_cell_file_name_is_spelled_outside_the_layout():
    names = set(layout.FILES)
    offenders = []
    for folder in ("pipeline", "stages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == LAYOUT:
                continue
            for line, text in _strings(ast.parse(path.read_text(), str(path))):
                if text in names or text.startswith(PREFIXES):
                    offenders.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not offenders, "use pipeline.runtime.store.layout's names: " + "; ".join(offenders)


def test_the_scan_sees_a_spelled_name():
    tree = ast.parse('p = folder / "history.parquet"\nq = f"embeddings_e{e:04d}.parquet"\n')
    seen = [text for _, text in _strings(tree)]
    assert layout.HISTORY in seen and any(t.startswith(PREFIXES) for t in seen)
