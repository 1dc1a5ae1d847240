"""DESIGN.md's rule: the math packages import only numpy, scipy and torch (and the stdlib)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "pipeline"
PURE = ["losses", "encoders", "datasets", "stats", "search", "bounds", "probe", "train.py",
        "grid.py", "options.py", "seeding.py", "metrics.py", "fingerprint"]
# annotated_types: the constraint vocabulary of the options dataclasses (pipeline/options.py)
ALLOWED = {"numpy", "scipy", "torch", "pipeline", "annotated_types"} | set(sys.stdlib_module_names)
ALLOWED_ENCODERS = ALLOWED | {"torchvision", "open_clip", "timm", "safetensors"}
FORBIDDEN_PIPELINE = ("pipeline.runtime", "pipeline.report")
# sklearn ships the digits set itself; only that loader may import it (lazily).
EXCEPTIONS = {("datasets/digits.py", "sklearn.datasets")}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_math_packages_do_no_io_imports():
    offenders = []
    for part in PURE:
        target = ROOT / part
        files = [target] if target.is_file() else sorted(target.rglob("*.py"))
        allowed = ALLOWED_ENCODERS if part == "encoders" else ALLOWED
        for f in files:
            for name in _imports(f):
                if (str(f.relative_to(ROOT)), name) in EXCEPTIONS:
                    continue
                if name.split(".")[0] not in allowed or name.startswith(FORBIDDEN_PIPELINE):
                    offenders.append(f"{f.relative_to(ROOT.parent)}: {name}")
    assert not offenders, offenders


# docs/DESIGN.md, "The runtime's layers": each orchestration library has its adapters in
# pipeline/runtime/, and no other module of pipeline/ or stages/ imports it (so the per-cell
# work, the storage and the tables run without a scheduler, a Ray instance or a tracking store).
# Modules are named by their path under pipeline/runtime/.
ADAPTERS = {"ray": {"backends/executor.py", "backends/scheduler.py"},
            "dask": {"backends/scheduler.py", "backends/dask_ops.py", "backends/probe_ops.py"},
            "distributed": {"backends/scheduler.py"},
            "mlflow": {"tracking/runs.py", "tracking/sql_writer.py"}}
RUNTIME = ROOT / "runtime"


def _runtime_name(path: Path) -> str | None:
    return path.relative_to(RUNTIME).as_posix() if RUNTIME in path.parents else None


def test_each_orchestration_library_is_imported_by_its_adapters_only():
    offenders = []
    for path in sorted([*ROOT.rglob("*.py"), *(ROOT.parent / "stages").rglob("*.py")]):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in ADAPTERS and _runtime_name(path) not in ADAPTERS[top]:
                offenders.append(f"{path.relative_to(ROOT.parent)}: {name}")
    assert not offenders, offenders


# The runtime's floors, bottom up (docs/DESIGN.md's table): a module imports from its own
# sub-package and from lower floors only; two sub-packages on one floor do not import each other.
FLOORS = {"paths.py": 0, "progress.py": 0, "warm.py": 0, "memo.py": 0,
          "store": 1,
          "cells": 2, "context.py": 2,
          "backends": 3, "tracking": 3,
          "grid_run.py": 4, "suite_plan.py": 4,
          "driver.py": 5}


def _floor_key(runtime_name: str) -> str:
    return runtime_name.split("/")[0]


def test_the_runtime_folders_import_only_lower_floors():
    unplaced = sorted({_floor_key(_runtime_name(p)) for p in RUNTIME.rglob("*.py")}
                      - set(FLOORS) - {"__init__.py"})
    assert not unplaced, f"give these a floor in FLOORS (and docs/DESIGN.md): {unplaced}"
    offenders = []
    for path in sorted(RUNTIME.rglob("*.py")):
        me = _floor_key(_runtime_name(path))
        if me == "__init__.py":
            continue
        for name in _imports(path):
            if not name.startswith("pipeline.runtime."):
                continue
            parts = name.split(".")[2:]
            other = parts[0] if (RUNTIME / parts[0]).is_dir() else parts[0] + ".py"
            if other != me and FLOORS[other] >= FLOORS[me]:
                offenders.append(f"runtime/{_runtime_name(path)} (floor {FLOORS[me]}): {name} "
                                 f"(floor {FLOORS[other]})")
    assert not offenders, offenders


def test_the_runtimes_lower_layers_import_nothing_above_them():
    """layout names files, progress words the progress lines and warm hands stages off (stdlib
    only); the scheduler runs tasks and imports no math; the per-cell analyses and the table
    builders import neither a scheduler nor each other's library (no pandas in the per-cell
    analyses); grid_run plans and claims without Ray or MLflow."""
    math = ("pipeline.stats", "pipeline.search", "pipeline.bounds", "pipeline.probe",
            "pipeline.losses", "pipeline.train")
    stdlib_only = lambda n: n.split(".")[0] not in sys.stdlib_module_names  # noqa: E731
    rules = {
        "store/layout.py": stdlib_only,
        "cells/task.py": stdlib_only,
        "backends/capacity.py": stdlib_only,
        "backends/scheduler.py": lambda n: n.startswith(math) or n.startswith("pipeline.runtime.")
        and n not in ("pipeline.runtime.backends.executor", "pipeline.runtime.progress",
                      "pipeline.runtime.backends.addresses"),
        "progress.py": stdlib_only,
        # stages/__init__.py imports it before anything else: its cost is every stage's
        "warm.py": stdlib_only,
        "memo.py": lambda n: stdlib_only(n) and n != "pipeline",  # the package: where it is
        "paths.py": stdlib_only,
        "backends/addresses.py": lambda n: stdlib_only(n) and not n.startswith("pipeline.config"),
        "cells/analyses.py": lambda n: n.split(".")[0] == "pandas"
        or n.startswith(("pipeline.runtime.backends", "pipeline.runtime.cells.tables")),
        "cells/tables.py": lambda n: n.startswith(("pipeline.runtime.backends", "torch")),
        "grid_run.py": lambda n: n.startswith(("pipeline.runtime.backends.executor",
                                               "pipeline.runtime.tracking")),
    }
    offenders = [f"runtime/{file}: {name}" for file, forbidden in rules.items()
                 for name in _imports(RUNTIME / file) if forbidden(name)]
    assert not offenders, offenders


def test_no_package_folder_holds_more_than_fifteen_modules():
    """STYLE.md §19: a folder is a concept; past about fifteen modules it is several. Every
    folder of pipeline/, the package itself included."""
    crowded = {str(d.relative_to(ROOT.parent)): n for d in [ROOT, *ROOT.rglob("*")]
               if d.is_dir() and d.name != "__pycache__"
               and (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"])) > 15}
    assert not crowded, crowded


def test_the_training_path_imports_no_io_or_config_library():
    """Transitively: what a Ray worker imports to train a cell (pipeline.train, the grid's cells,
    the options' defaults) reaches none of the I/O or configuration libraries."""
    import subprocess

    forbidden = ["yaml", "pydantic", "ray", "dask", "distributed", "mlflow", "pyarrow", "pandas"]
    code = ("import sys, pipeline.train, pipeline.grid, pipeline.options; "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT.parent).stdout.split()
    assert not set(forbidden) & set(loaded), sorted(set(forbidden) & set(loaded))


def test_test_files_have_unique_basenames():
    """pytest's default import mode keys test modules by basename (no __init__.py here):
    two test_x.py in different folders stop the whole collection on a fresh clone."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(tests.rglob("test_*.py")):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(tests)} and {path.relative_to(tests)}")
        seen.setdefault(path.name, path)
    assert not clashes, "test files share a basename: " + "; ".join(clashes)


# pipeline/report/ in two layers (docs/DESIGN.md, "The report's two layers"): analysis turns
# stage tables into values, render turns values into Markdown, LaTeX, HTML and figures. Modules
# are named by their path under pipeline/report/ (grid/, suite/, papers/, render/: one concept
# each, docs/DESIGN.md); a concept's folder may hold both layers, the rules are per module.
REPORT = ROOT / "report"
REPORT_ANALYSIS = {"grid.build", "grid.leaderboard", "grid.controls", "grid.probe",
                   "grid.compare", "grid.ranks", "grid.tables", "grid.board", "grid.figure_plan",
                   "grid.selection",
                   "papers.table1", "papers.one_over_k", "papers.side_by_side",
                   "papers.image_rows", "papers.trained_enough", "papers.epoch_gap",
                   "suite.board", "suite.values", "suite.tables", "suite.notes", "suite.points"}
REPORT_RENDER = {"render.markdown", "render.latex", "render.html", "render.canvas",
                 "render.figures", "render.cd_diagram", "render.rank_interval_plot",
                 "render.profile_plot", "render.tex_escape", "render.publish", "render.page",
                 "papers.one_over_k_plot", "papers.simplex", "papers.markdown",
                 "papers.image_rows_md",
                 "suite.render", "suite.publish"}
# numbers → text (fmt_value, fmt_stat, pct), shared by both layers: imports the registry only
REPORT_FORMAT = {"formatting"}
# inference and fitting: what a render module may not import
INFERENCE = ("scipy", "statsmodels", "pipeline.stats", "pipeline.search", "pipeline.bounds")


def _report_imports(name: str) -> set[str]:
    """Every module ``pipeline/report/<name>.py`` (``name`` dotted: ``grid.board``) imports, at
    the top or inside a function (``from pipeline.report.grid import x`` counts as
    ``pipeline.report.grid.x``)."""
    path = REPORT.joinpath(*name.split(".")).with_suffix(".py")
    names = _imports(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("pipeline.report"):
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_every_report_module_has_a_layer():
    modules = {".".join(p.relative_to(REPORT).with_suffix("").parts)
               for p in REPORT.rglob("*.py") if p.name != "__init__.py"}
    layers = REPORT_ANALYSIS | REPORT_RENDER | REPORT_FORMAT
    assert modules == layers, {"unlisted": modules - layers, "missing": layers - modules}
    assert not REPORT_ANALYSIS & REPORT_RENDER


def test_the_report_analysis_layer_imports_no_render_module():
    render = {f"pipeline.report.{m}" for m in REPORT_RENDER}
    offenders = [(m, name) for m in sorted(REPORT_ANALYSIS) for name in _report_imports(m)
                 if name in render]
    assert not offenders, offenders


def test_the_report_render_layer_computes_no_statistic():
    offenders = [(m, name) for m in sorted(REPORT_RENDER | REPORT_FORMAT)
                 for name in _report_imports(m)
                 if name.startswith(INFERENCE)]
    assert not offenders, offenders


def test_the_report_format_helpers_import_only_the_registry():
    for m in REPORT_FORMAT:
        project = {n for n in _report_imports(m) if n.startswith("pipeline")}
        assert project <= {"pipeline.metrics"}, (m, project)
