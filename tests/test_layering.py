"""DESIGN.md's rule: the math packages import only numpy, scipy and torch (and the stdlib)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "pipeline"
PURE = ["losses", "encoders", "datasets", "stats", "search", "bounds", "probe", "train.py",
        "grid.py", "options.py", "seeding.py", "metrics.py", "fingerprint.py"]
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
# work, the storage and the tables run without a scheduler, a Ray instance or a tracking store)
ADAPTERS = {"ray": {"executor.py", "scheduler.py"},
            "dask": {"scheduler.py", "dask_ops.py", "probe_ops.py"},
            "distributed": {"scheduler.py"},
            "mlflow": {"tracking.py", "tracking_sql.py"}}
RUNTIME = ROOT / "runtime"


def test_each_orchestration_library_is_imported_by_its_adapters_only():
    offenders = []
    for path in sorted([*ROOT.rglob("*.py"), *(ROOT.parent / "stages").rglob("*.py")]):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in ADAPTERS and not (path.parent == RUNTIME and path.name in ADAPTERS[top]):
                offenders.append(f"{path.relative_to(ROOT.parent)}: {name}")
    assert not offenders, offenders


def test_the_runtimes_lower_layers_import_nothing_above_them():
    """layout names files, progress words the progress lines and warm hands stages off (stdlib
    only); the scheduler runs tasks and imports no math; the per-cell tasks and the table
    builders import neither a scheduler nor each other's library (no pandas in the per-cell
    tasks); grid_run plans and claims without Ray or MLflow."""
    math = ("pipeline.stats", "pipeline.search", "pipeline.bounds", "pipeline.probe",
            "pipeline.losses", "pipeline.train")
    rules = {
        "layout.py": lambda n: n.split(".")[0] not in sys.stdlib_module_names,
        "scheduler.py": lambda n: n.startswith(math) or n.startswith("pipeline.runtime.")
        and n not in ("pipeline.runtime.executor", "pipeline.runtime.progress",
                      "pipeline.runtime.addresses"),
        "progress.py": lambda n: n.split(".")[0] not in sys.stdlib_module_names,
        # stages/__init__.py imports it before anything else: its cost is every stage's
        "warm.py": lambda n: n.split(".")[0] not in sys.stdlib_module_names,
        "addresses.py": lambda n: n.split(".")[0] not in sys.stdlib_module_names
        and not n.startswith("pipeline.config"),
        "cell_tasks.py": lambda n: n.split(".")[0] == "pandas"
        or n.startswith(("pipeline.runtime.dask_ops", "pipeline.runtime.tables",
                         "pipeline.runtime.scheduler")),
        "tables.py": lambda n: n.startswith(("pipeline.runtime.dask_ops",
                                             "pipeline.runtime.scheduler", "torch")),
        "grid_run.py": lambda n: n.startswith(("pipeline.runtime.executor",
                                               "pipeline.runtime.tracking")),
    }
    offenders = [f"runtime/{file}: {name}" for file, forbidden in rules.items()
                 for name in _imports(RUNTIME / file) if forbidden(name)]
    assert not offenders, offenders


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
                 "render.profile_plot", "render.tex_escape", "render.publish",
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


def test_no_report_folder_holds_more_than_fifteen_modules():
    """STYLE.md §19: a folder is a concept; past about fifteen modules it is several."""
    crowded = {str(d.relative_to(ROOT)): n for d in [REPORT, *REPORT.rglob("*/")]
               if d.is_dir() and (n := len([*d.glob("*.py")]) - 1) > 15}
    assert not crowded, crowded


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
