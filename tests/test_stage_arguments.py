"""Every stage rejects arguments it does not take (settings come from params.yaml), before any
work: no params are read, nothing is written."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_ARGUMENTS = ["prepare", "train", "stats", "search", "bounds", "geometry",
                "probe", "report", "suite_report"]


@pytest.mark.parametrize("stage", NO_ARGUMENTS)
def test_a_stage_rejects_arguments(stage, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no params.resolved.yaml here: reading it would fail otherwise
    module = importlib.import_module(f"stages.{stage}")
    assert module.main(["--epochs", "3"]) == 2
    err = capsys.readouterr().err
    assert f"{stage}: takes no arguments (got ['--epochs', '3'])" in err
    assert list(tmp_path.iterdir()) == []


def test_resolve_rejects_unknown_arguments(tmp_path, monkeypatch, capsys):
    from stages import resolve

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        resolve.main(["--epochs", "3"])
    assert exit_.value.code == 2 and "unrecognized arguments: --epochs 3" in capsys.readouterr().err


@pytest.mark.parametrize("stage", [*NO_ARGUMENTS, "resolve"])
def test_the_command_line_reaches_main(stage):
    """``python -m stages.<name> --x`` passes its arguments on: main(sys.argv[1:]) (or, for
    argparse's stages, main() reading sys.argv itself), so a stray option is refused, not
    silently ignored. Read from the source: cheaper than starting eight interpreters."""
    tree = ast.parse((ROOT / "stages" / f"{stage}.py").read_text())
    guard = [node for node in tree.body if isinstance(node, ast.If)
             and ast.unparse(node.test) == "__name__ == '__main__'"]
    assert len(guard) == 1, f"stages/{stage}.py: no `if __name__ == '__main__':` block"
    calls = [ast.unparse(n) for n in ast.walk(guard[0]) if isinstance(n, ast.Call)
             and ast.unparse(n.func) == "main"]
    allowed = {"main(sys.argv[1:])"} | ({"main()"} if stage == "resolve" else set())
    assert calls and set(calls) <= allowed, f"stages/{stage}.py calls {calls}"
