"""Each stage of dvc.yaml reruns when a project module it imports changes (transitively, as
Python runs them): its digest in params.tracked.yaml covers those files
(pipeline/config/code.py), checked here against an import walk of the test's own that asks
Python where each module is; and every path dvc.yaml lists exists."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from pipeline.config.code import code_digest
from pipeline.config.code import imported_files as hashed
from tests.conftest import ROOT

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
PROJECT = ("pipeline", "stages")


def _file(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def imported_files(module: str) -> set[Path]:
    """The project's source files that importing ``module`` runs: its imports (also those inside
    functions, which run when called) and the packages above every module imported."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] not in PROJECT:
            continue
        path = _file(name)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
                todo += [base, *(f"{base}.{a.name}" for a in node.names)]
    return {p for p in seen.values() if not _only_a_docstring(p)}


def _only_a_docstring(path: Path) -> bool:
    """A package marker holding a docstring alone runs no code: it cannot change a result."""
    body = ast.parse(path.read_text()).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def _module(stage: str) -> str:
    return DVC[stage]["cmd"].split("python -m ", 1)[1].split()[0]


@pytest.mark.parametrize("stage", sorted(set(DVC) - {"resolve"}))
def test_each_stage_digest_covers_every_module_it_imports(stage):
    """The files the stage's code digest hashes are the files running its module imports; the
    stage declares the digest (stages.<stage>), so an edit to any of them reruns it."""
    assert _module(stage) == f"stages.{stage}"
    digest = set(hashed(_module(stage)))
    missing = sorted(str(p.relative_to(ROOT)) for p in imported_files(_module(stage)) - digest)
    assert not missing, f"the code digest of stage {stage!r} misses: {missing}"
    extra = sorted(str(p.relative_to(ROOT)) for p in digest - imported_files(_module(stage))
                   if not _only_a_docstring(p))
    assert not extra, f"the code digest of stage {stage!r} hashes what it never runs: {extra}"


def test_resolve_is_rerun_always_and_lists_no_code():
    """resolve computes the digests, so DVC runs it every time (its memo makes an unchanged
    rerun cheap); no stage lists project code among its deps (one column per module in `dvc exp
    show`): the digests carry it."""
    assert DVC["resolve"].get("always_changed") is True
    code = {stage: [d for d in DVC[stage].get("deps", [])
                    if str(next(iter(d)) if isinstance(d, dict) else d).startswith(PROJECT)]
            for stage in DVC}
    assert not any(code.values()), code


def test_a_code_digest_changes_exactly_when_a_file_its_stage_imports_changes(tmp_path):
    """On a copy of the project: an edit to a module the search stage imports changes its
    digest; an edit to one only the report imports does not (and changes the report's)."""
    import shutil

    for part in PROJECT:
        shutil.copytree(ROOT / part, tmp_path / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = {s: code_digest(f"stages.{s}", tmp_path) for s in ("search", "report")}
    assert before == {s: code_digest(f"stages.{s}", ROOT) for s in before}
    searched = tmp_path / "pipeline" / "search" / "finite_k.py"
    searched.write_text(searched.read_text() + "\n# an edit\n")
    after = {s: code_digest(f"stages.{s}", tmp_path) for s in before}
    assert after["search"] != before["search"]
    rendered = tmp_path / "pipeline" / "report" / "render" / "latex.py"
    assert rendered not in hashed("stages.search", tmp_path)
    rendered.write_text(rendered.read_text() + "\n# an edit\n")
    last = {s: code_digest(f"stages.{s}", tmp_path) for s in before}
    assert last["search"] == after["search"] and last["report"] != after["report"]


@pytest.mark.parametrize("stage", sorted(DVC))
def test_every_listed_dependency_exists(stage):
    for dep in DVC[stage].get("deps", []):
        if not dep.startswith("data/"):  # outputs of earlier stages
            assert (ROOT / dep).exists(), f"{stage}: {dep} does not exist"


def test_the_derivation_sees_imports_inside_functions():
    files = {str(p.relative_to(ROOT)) for p in imported_files("stages.search")}
    assert "pipeline/runtime/cells/evaluate.py" in files  # imported by cell_tasks's task functions
    assert "pipeline/search/finite_k.py" in files


def test_every_param_a_stage_declares_is_tracked(tmp_path, tiny_params, monkeypatch):
    """The keys of params.tracked.yaml that stages declare exist in what resolve writes."""
    from stages import resolve

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    monkeypatch.chdir(tmp_path)
    assert resolve.main(["--params", "params.yaml"]) == 0
    tracked = yaml.safe_load((tmp_path / "params.tracked.yaml").read_text())
    for stage, spec in DVC.items():
        for entry in spec.get("params", []):
            for key in entry.get("params.tracked.yaml", []):
                node = tracked
                for part in key.split("."):
                    assert part in node, f"{stage}: {key} is not in params.tracked.yaml"
                    node = node[part]


def test_each_stage_declares_its_digest_of_the_params_it_reads():
    """Every stage but resolve declares its digest (``stages.<stage>``, tracked.READS; train also
    the grid axes) and nothing else: the params columns of `dvc exp show`."""
    from pipeline.config.tracked import READS

    declared = {stage: [key for entry in spec.get("params", [])
                        for key in entry.get("params.tracked.yaml", [])]
                for stage, spec in DVC.items() if stage != "resolve"}
    assert set(declared) == set(READS)
    for stage, keys in declared.items():
        assert keys == [*(["grid"] if stage == "train" else []), f"stages.{stage}"], stage


def test_a_stage_digest_changes_exactly_when_a_value_it_reads_changes(tmp_path, tiny_params):
    """Changing one key of the resolved params changes the digest of the stages that read it
    (its section, or the key itself) and no other."""
    from pipeline.config import load
    from pipeline.config.tracked import READS, tracked

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    resolved = load(tmp_path / "params.yaml").model_dump(mode="json")
    before = tracked(resolved)["stages"]
    for key in ("data.name", "train.epochs", "report.level", "stats.epochs", "tracking",
                "search", "geometry", "loss_options"):
        changed = yaml.safe_load(yaml.safe_dump(resolved))
        section, _, leaf = key.partition(".")
        if leaf:
            changed[section][leaf] = "changed"
        else:
            changed[section] = {"changed": True}
        after = tracked(changed)["stages"]
        readers = {stage for stage, keys in READS.items() if section in keys or key in keys}
        assert readers and {s for s in before if before[s] != after[s]} == readers, key
