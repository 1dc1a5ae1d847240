"""The ``cbench`` package: imports that point one way, one module per subcommand, and one way to
fail (a UsageError: one line ``cbench <command>: <message>`` on stderr, exit code 2)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.cli.app import COMMANDS
from pipeline.cli.stage import STAGES

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "pipeline" / "cli"
ENTRY = {"__init__", "__main__"}  # they import app and nothing else
SHARED = "common"  # imports nothing from the package


def _package_imports(path: Path) -> set[str]:
    """The modules of pipeline.cli that ``path`` imports (``__init__`` for the package itself:
    ``from pipeline.cli import x`` runs the package's __init__, whatever x is)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from .common import y
                base = ".".join(["pipeline.cli", *filter(None, [base])])
            targets = [f"{base}.{a.name}" if base == "pipeline.cli" else base
                       for a in node.names]
        else:
            continue
        for name in targets:
            if name == "pipeline.cli":
                names.add("__init__")
            elif name.startswith("pipeline.cli."):
                module = name.removeprefix("pipeline.cli.").split(".")[0]
                names.add(module if (CLI / f"{module}.py").exists() else "__init__")
    return names


def test_imports_point_one_way():
    """Precisely: ``__init__`` and ``__main__`` import only ``app``; ``app`` imports only
    ``common`` and subcommand modules; a subcommand module imports only ``common``, never
    ``app``, ``__init__`` (``from pipeline.cli import ...``) or another subcommand; ``common``
    imports nothing from the package. So the import graph of pipeline/cli has no cycle."""
    modules = {p.stem: _package_imports(p) for p in sorted(CLI.glob("*.py"))}
    subcommands = set(modules) - ENTRY - {"app", SHARED}
    allowed = {"__init__": {"app"}, "__main__": {"app"}, "app": subcommands | {SHARED},
               SHARED: set()} | {m: {SHARED} for m in subcommands}
    wrong = {m: sorted(imports - allowed[m]) for m, imports in modules.items()
             if imports - allowed[m]}
    assert not wrong, f"pipeline/cli modules importing what they may not: {wrong}"


def test_the_import_check_sees_the_forbidden_imports():
    text = ("from pipeline.cli import main\nimport pipeline.cli.app\nfrom . import common\n"
            "from .compare import run\n")
    path = Path(__file__).parent / "_cli_imports_probe.py"
    try:
        path.write_text(text)
        assert _package_imports(path) == {"__init__", "app", "common", "compare"}
    finally:
        path.unlink()


def test_one_module_per_subcommand():
    subcommands = {p.stem for p in CLI.glob("*.py")} - ENTRY - {"app", SHARED}
    assert set(COMMANDS) == subcommands
    for name, command in COMMANDS.items():
        assert command.doc and command.doc.startswith(f"``cbench {name}"), name


def test_stage_names_are_the_stage_modules():
    assert set(STAGES) == {p.stem for p in (ROOT / "stages").glob("*.py")} - {"__init__"}


@pytest.mark.parametrize(("argv", "message"), [
    (["compare", "infonce", "dcl", "--level", "high"],
     "cbench compare: argument --level: invalid float value: 'high' "
     "(see `cbench compare --help`)"),
    (["compare", "infonce"],
     "cbench compare: the following arguments are required: B (see `cbench compare --help`)"),
    (["leaderboard", "--top", "x"],
     "cbench leaderboard: argument --top: invalid int value: 'x' "
     "(see `cbench leaderboard --help`)"),
    (["leaderboard", "--params", "none.yaml"],
     "cbench leaderboard: --params none.yaml: no such file; run from the project folder or "
     "name its params.yaml"),
    (["verify", "--sample", "0"], "cbench verify: --sample 0: must be >= 1"),
    (["schema", "--nope"], "cbench schema: unrecognized arguments: --nope (see `cbench --help`)"),
    (["nope"], "cbench: argument COMMAND: invalid choice: 'nope' (choose from 'stage', "
               "'leaderboard', 'compare', 'verify', 'schema', 'release', 'diff', 'site', 'suite') "
               "(see `cbench --help`)"),
])
def test_one_way_to_fail(argv, message, tmp_path, monkeypatch, capsys):
    """argparse's errors and the subcommands' own, from several subcommands: one line on
    stderr, ``cbench <command>: <message>``, nothing on stdout, exit code 2."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == message + "\n"


def test_help_exits_0(capsys):
    assert main(["compare", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: cbench compare")


def test_python_dash_m_and_no_heavy_import():
    """``python -m pipeline.cli`` is ``cbench``; parsing loads neither pandas nor torch (each
    subcommand imports what it needs when it runs)."""
    code = ("import sys, runpy; sys.argv = ['cbench', '--help']\n"
            "try:\n    runpy.run_module('pipeline.cli', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted({'pandas', 'torch'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert "usage: cbench" in done.stdout and done.stdout.rstrip().endswith("[]")
