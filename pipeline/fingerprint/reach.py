"""What a cell reaches: the names a unit's code references, resolved statically to units, and
followed from the roots; and the units of runtime objects (a registry entry's functions and
classes)."""

from __future__ import annotations

import ast
import contextlib
import functools
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pipeline.fingerprint.sources import (
    CODE_KEYS,
    EDGES,
    REACH,
    REFS,
    info_at,
    module_info,
    module_path,
)
from pipeline.fingerprint.units import REGISTRIES, TOPLEVEL, Unit, import_targets

# --- following names -----------------------------------------------------------------------------

Target = tuple[str, str]  # ("unit", key) | ("module", name)


def _resolve_attr(module: str, attr: str, depth: int = 0) -> list[Target]:
    """What ``module.attr`` is: a unit of the module, what it imported under that name, or its
    submodule."""
    info = module_info(module)
    if info is None or depth > 20:
        return []
    out: list[Target] = [("unit", k) for k in info.names.get(attr, [])]
    for target in info.imports.get(attr, []):
        out += _import_target(target, depth + 1)
    if not out and module_path(f"{module}.{attr}") is not None:
        out.append(("module", f"{module}.{attr}"))
    if not out:
        for star in info.imports.get("*", []):
            out += _resolve_attr(star[1], attr, depth + 1)
    return out


def _import_target(target: tuple[str, ...], depth: int = 0) -> list[Target]:
    if target[0] == "module":
        return [("module", target[1])] if module_path(target[1]) is not None else []
    if target[0] == "attr":
        return _resolve_attr(target[1], target[2], depth)
    return []


def _chains(node: ast.AST) -> Iterator[tuple[str, ...]]:
    """Every name the code reads: ``a.b.c`` as ("a", "b", "c"), a plain name as ("a",)."""
    if isinstance(node, ast.Attribute):
        parts = [node.attr]
        base = node.value
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            yield (base.id, *reversed(parts))
        else:
            yield from _chains(base)
    elif isinstance(node, ast.Name):
        yield (node.id,)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _chains(child)


def _find_refs(module: str, key: str) -> tuple[str, ...]:
    """The units that unit ``key`` of ``module`` references (registry tables left out)."""
    info = module_info(module)
    assert info is not None
    unit = info.units[key]
    package = module if info.path.name == "__init__.py" else module.rpartition(".")[0]
    local: dict[str, list[tuple[str, ...]]] = {}
    for root in unit.nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for bound, target in import_targets(node, package):
                    local.setdefault(bound, []).append(target)
    out: list[str] = []
    for chain in dict.fromkeys(c for root in unit.nodes for c in _chains(root)):
        head = chain[0]
        targets: list[Target] = [("unit", k) for k in info.names.get(head, [])]
        for target in local.get(head, []) + info.imports.get(head, []):
            targets += _import_target(target)
        for attr in chain[1:]:
            if not any(kind == "module" for kind, _ in targets):
                break
            targets = [t for kind, name in targets
                       for t in (_resolve_attr(name, attr) if kind == "module" else [(kind, name)])]
        for kind, name in targets:
            if kind == "unit":
                out.append(name)
            else:  # a module used whole: all of it
                mod = module_info(name)
                out += list(mod.units) if mod is not None else []
    return tuple(k for k in dict.fromkeys(out) if k != key and k not in REGISTRIES)


def _refs(key: str) -> tuple[str, ...]:
    """:func:`_find_refs`, memoised per analysis of the unit's module."""
    module = key.split(":", 1)[0]
    info = module_info(module)
    if info is None or key not in info.units:
        return ()
    if (module, id(info), key) not in REFS:
        REFS[(module, id(info), key)] = _find_refs(module, key)
    return REFS[(module, id(info), key)]


def unit_named(key: str) -> Unit | None:
    """The unit ``key`` names in its module's source now, else None."""
    info = module_info(key.split(":", 1)[0])
    return info.units.get(key) if info is not None else None


def _edges(key: str) -> tuple[str, tuple[str, ...]]:
    """(hash of the unit, the units it leads to: its references and the top-level statements of
    its module and of that module's packages, which run when it is imported)."""
    if key not in EDGES:
        unit = unit_named(key)
        if unit is None:
            raise ValueError(f"code fingerprint: {key!r} is not a unit of a followed module "
                             "(renamed or moved? see pipeline.fingerprint.TRAINING_ROOTS)")
        parts = key.split(":", 1)[0].split(".")
        tops = [f"{'.'.join(parts[:i])}:{TOPLEVEL}" for i in range(1, len(parts) + 1)]
        EDGES[key] = unit.hash, (*_refs(key), *(t for t in tops if t != key and unit_named(t)))
    return EDGES[key]


def _reach(root: str) -> frozenset[str]:
    """The units ``root`` reaches, itself included (memoised per root)."""
    if root not in REACH:
        seen = {root}
        todo = [root]
        while todo:
            for nxt in _edges(todo.pop())[1]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        REACH[root] = frozenset(seen)
    return REACH[root]


def closure(roots: Iterable[str]) -> dict[str, str]:
    """``{key: hash}`` of the roots and every unit they reach."""
    keys: set[str] = set()
    for root in roots:
        keys |= _reach(root)
    return {k: _edges(k)[0] for k in keys}


# --- runtime objects (registry entries) to units -------------------------------------------------

def _code_key(code: types.CodeType, module: str) -> str | None:
    """The unit that defines ``code`` (a function, method, closure or lambda of ``module``)."""
    if (code, module) not in CODE_KEYS:
        key = _find_code_key(code, module)
        if key is None:  # not (yet) followed code: not remembered
            return None
        CODE_KEYS[(code, module)] = key
    return CODE_KEYS[(code, module)]


def _find_code_key(code: types.CodeType, module: str) -> str | None:
    path = module_path(module)
    if path is None or Path(code.co_filename).resolve() != path:
        return None
    info = info_at(module, path, loaded=True)  # where the loaded code's line numbers point
    qualname = getattr(code, "co_qualname", code.co_name)
    head = qualname.split(".")[0]
    if head != "<lambda>":
        return f"{module}:{head}" if f"{module}:{head}" in info.units else None
    found = [u for line, u, lam in info.lambdas if line == code.co_firstlineno
             and [a.arg for a in lam.args.args] == list(code.co_varnames[:code.co_argcount])]
    return found[0].key if found else None


def object_keys(obj: Any, depth: int = 0) -> list[str]:
    """The units of a runtime callable or class: a function (with what its closure holds), a
    lambda, a method, a ``functools.partial``, a class, an instance of a project class."""
    if depth > 10:
        return []
    if isinstance(obj, functools.partial):
        parts = [obj.func, *obj.args, *obj.keywords.values()]
        return [k for p in parts for k in object_keys(p, depth + 1)]
    if isinstance(obj, types.MethodType):
        return object_keys(obj.__func__, depth + 1)
    if isinstance(obj, types.FunctionType):
        key = _code_key(obj.__code__, obj.__module__)
        out = [key] if key else []
        for cell in obj.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell
                out += object_keys(cell.cell_contents, depth + 1)
        if hasattr(obj, "__wrapped__"):
            out += object_keys(obj.__wrapped__, depth + 1)
        return out
    if isinstance(obj, type):
        module = getattr(obj, "__module__", "")
        info = module_info(module)
        head = obj.__qualname__.split(".")[0]
        return [f"{module}:{head}"] if info is not None and f"{module}:{head}" in info.units else []
    if hasattr(obj, "__wrapped__"):
        return object_keys(obj.__wrapped__, depth + 1)
    if callable(obj) and not isinstance(obj, types.BuiltinFunctionType):
        return object_keys(type(obj), depth + 1)
    return []


def unit_of_code(code: types.CodeType, module: str) -> str | None:
    """The innermost unit whose source holds ``code`` (a function, lambda, comprehension or class
    body that ran), else None (e.g. a module's own body)."""
    path = module_path(module)
    if path is None or code.co_name == "<module>" or Path(code.co_filename).resolve() != path:
        return None
    info = info_at(module, path, loaded=True)
    line, best = code.co_firstlineno, None
    node: Any
    for unit in info.units.values():
        for node in unit.nodes:
            first = min([node, *getattr(node, "decorator_list", [])], key=lambda n: n.lineno)
            if first.lineno <= line <= (node.end_lineno or node.lineno):
                size = (node.end_lineno or node.lineno) - first.lineno
                if best is None or size < best[0] or (size == best[0] and unit.kind == "lambda"):
                    best = (size, unit.key)
    return best[1] if best else None
