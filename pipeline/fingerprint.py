"""Code fingerprints: which code made a cell's files, so that a cell made by other code is stale.

A cell's fingerprint is a hash per *unit* of the project's code that training the cell and
writing its files may run, and a digest over them:

- **Units.** A unit is one top-level statement of a project module: a function (with its
  decorators and nested functions, e.g. ``_flat`` with its ``wrapped``), a class (with all its
  methods), a module-level constant or table (every statement that binds or fills the name), the
  module's other top-level statements (``<module>:<toplevel>``: they run when it is imported), or
  a lambda inside a module-level table (``pipeline.datasets.registry:DATASETS['laplace'].load``).
  Keys name the module and the unit, never a line number, so code moving in a file is no change.
- **What is followed.** From the roots — :data:`TRAINING_ROOTS` (``train_cell``: the loop,
  seeding, schedules, device setup, negatives; ``run_cell``: the files, weights and checksums) and
  the cell's registry entries (its loss's adapter and similarity builder, its schedule, its
  encoder's builder with the functions its closure holds, its dataset's loader and its
  augmentation's view, each entry's options class, and the entry's own fields as data:
  ``pipeline.losses.registry:LOSSES['xclr']``) — every name a unit's code references that
  resolves statically (the module's globals, its imports, ``module.attr`` chains, imports inside
  a function) to a project unit is followed, transitively. The registry tables themselves
  (:data:`REGISTRIES`) are not followed: a reference to ``LOSSES`` reaches only the cell's own
  entry, so editing one loss makes only that loss's cells stale. A plugin's modules (a module
  name or a ``.py`` file in ``plugins:``) are followed like the project's, with the modules of its
  own package (or, for a single file, the modules beside it).
- **The hash.** Each unit is hashed as a normalised token stream (:func:`normalised_tokens`):
  comments, blank lines, line breaks inside brackets, indentation width, trailing commas that
  change nothing and docstrings do not count; names, operators, literal values (``'a'`` and
  ``"a"`` are one value) and the statement structure do. f-strings are one token of their source
  text under every Python version (3.12 tokenises them in parts), so Python 3.11, 3.12 and 3.13
  give the same hashes for the same source.

Not covered: code reached only dynamically (``getattr``, ``importlib``, a string naming a
function), third-party code (torch, numpy, pyarrow: their versions are not part of the
fingerprint), the params (they are the cell id), and the data (the version carries its hash).

Pure stdlib: sources are read from the files (nothing is imported to hash them), each module is
tokenised once per process, and a cell's fingerprint is computed once per distinct set of
registry entries (objective, loss, schedule, arch, dataset, augmentation).
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import hashlib
import importlib.util
import io
import json
import keyword
import sys
import textwrap
import tokenize
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

PROJECT = "pipeline"  # the package whose modules are followed (and plugins' own packages)
PROJECT_DIR = Path(__file__).resolve().parent
# What every cell runs: the training loop and what it calls; the code that writes its files.
TRAINING_ROOTS = ("pipeline.train:train_cell", "pipeline.runtime.cells:run_cell")
# Tables of every entry: a reference to one is not followed (a cell reaches its own entries).
REGISTRY_MODULES = {"LOSSES": "pipeline.losses.registry", "SCHEDULES": "pipeline.losses.schedules",
                    "ENCODERS": "pipeline.encoders.registry",
                    "DATASETS": "pipeline.datasets.registry",
                    "AUGMENTATIONS": "pipeline.datasets.augment"}
REGISTRIES = frozenset(f"{module}:{table}" for table, module in REGISTRY_MODULES.items())
TOPLEVEL = "<toplevel>"
HASH_CHARS = 16  # per unit, in the record

Pos = tuple[int, int]  # (line, column in characters), as tokenize gives them


# --- the normalised token stream ---------------------------------------------------------------

_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)  # 3.12+: f-strings come in parts
_FSTRING_END = getattr(tokenize, "FSTRING_END", -1)
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_OPEN, _CLOSE = "([{", ")]}"


def _slice(lines: list[str], start: Pos, end: Pos) -> str:
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1]:end[1]]
    parts = [lines[start[0] - 1][start[1]:], *lines[start[0]:end[0] - 1],
             lines[end[0] - 1][:end[1]]]
    return "".join(parts)


@functools.lru_cache(maxsize=65536)
def _literal(kind: str, text: str) -> str:
    try:
        return f"{kind}{ast.literal_eval(text)!r}"
    except (ValueError, SyntaxError):  # an f-string (3.11 gives it as one STRING)
        return f"F{text}"


def _raw_tokens(source: str) -> Iterator[tuple[Pos, Pos, str]]:
    """(start, end, text): every token that counts, with ``#<depth>`` before each statement."""
    lines = io.StringIO(source).readlines()
    depth, new_statement, brackets = 0, True, 0
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        kind, text, start = tok.type, tok.string, tok.start
        if kind in _SKIP:
            continue
        if kind == tokenize.INDENT:
            depth += 1
            continue
        if kind == tokenize.DEDENT:
            depth -= 1
            continue
        if kind == tokenize.NEWLINE or (kind == tokenize.OP and text == ";" and brackets == 0):
            new_statement = True
            continue
        if kind == _FSTRING_START:  # one token of its source text, as Python 3.11 gives it
            nested = 1
            while nested:
                inner = next(tokens)
                nested += (inner.type == _FSTRING_START) - (inner.type == _FSTRING_END)
            out = (start, inner.end, f"F{_slice(lines, start, inner.end)}")
        elif kind == tokenize.STRING:
            out = (start, tok.end, _literal("S", text))
        elif kind == tokenize.NUMBER:
            out = (start, tok.end, _literal("N", text))
        elif kind == tokenize.OP:
            brackets += (text in _OPEN) - (text in _CLOSE)
            out = (start, tok.end, f"O{text}")
        else:  # NAME (keywords included)
            out = (start, tok.end, f"W{text}")
        if new_statement:
            yield start, start, f"#{depth}"
            new_statement = False
        yield out


def _drop_trailing_commas(tokens: list[tuple[Pos, Pos, str]]) -> list[tuple[Pos, Pos, str]]:
    """Without the commas before a closing bracket that change nothing: in calls, signatures,
    list displays, dicts and sets (not ``(a,)``, a tuple, nor ``x[a,]``, a tuple index)."""
    out: list[tuple[Pos, Pos, str]] = []
    stack: list[bool] = []  # per open bracket: may its trailing comma go
    previous = ""
    for i, tok in enumerate(tokens):
        text = tok[2]
        if text in ("O(", "O["):  # after a value: a call or a subscript; else a display
            after_value = (previous[:1] == "W" and not keyword.iskeyword(previous[1:])
                           or previous in ("O)", "O]") or previous[:1] in ("S", "F"))
            stack.append(after_value if text == "O(" else not after_value)
        elif text == "O{":
            stack.append(True)
        elif text in ("O)", "O]", "O}") and stack:
            stack.pop()
        elif (text == "O," and stack and stack[-1] and i + 1 < len(tokens)
              and tokens[i + 1][2] in ("O)", "O]", "O}")):
            previous = text
            continue
        out.append(tok)
        previous = text  # (a statement's marker too: "(a,)" first in a statement is a tuple)
    return out


def _to_chars(lines: list[str], line: int, byte_col: int) -> Pos:
    """An AST position (UTF-8 byte column) as a tokenize position (character column)."""
    if line < 1 or line > len(lines):
        return line, byte_col
    return line, len(lines[line - 1].encode()[:byte_col].decode("utf-8", "replace"))


def _docstring_nodes(tree: ast.AST) -> list[ast.Expr]:
    """The docstrings of the module and of every class and function in it (statements only are
    walked: a docstring is the first statement of a body)."""
    out: list[ast.Expr] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out.append(first)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo += [n for n in getattr(node, name, None) or () if isinstance(n, ast.AST)]
    return out


def _span(lines: list[str], node: Any) -> tuple[Pos, Pos]:
    first = min([node, *getattr(node, "decorator_list", [])],
                key=lambda n: (n.lineno, n.col_offset))
    return (_to_chars(lines, first.lineno, first.col_offset),
            _to_chars(lines, node.end_lineno or node.lineno, node.end_col_offset or 0))


def _stream(source: str, docstrings: list[ast.Expr]) -> list[tuple[Pos, Pos, str]]:
    """The module's tokens that count, in order, without its docstrings."""
    lines = io.StringIO(source).readlines()
    tokens = list(_raw_tokens(source))
    starts = [t[0] for t in tokens]
    dropped: set[int] = set()
    for node in docstrings:  # its statement: up to the next statement's marker (3.12 reports
        first = bisect.bisect_left(starts, _span(lines, node)[0])  # some strings' ends in bytes)
        last = first + 1
        while last < len(tokens) and tokens[last][2][0] != "#":
            last += 1
        dropped.update(range(first, last))
    return _drop_trailing_commas([t for i, t in enumerate(tokens) if i not in dropped])


def normalised_tokens(source: str) -> list[str]:
    """The token stream that is hashed: comments, layout and docstrings gone (see the module
    docstring); the same list under Python 3.11, 3.12 and 3.13."""
    source = textwrap.dedent(source)
    return [t[2] for t in _stream(source, _docstring_nodes(ast.parse(source)))]


def _digest(parts: Iterable[str]) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def source_hash(source: str) -> str:
    """SHA-256 of the normalised token stream of ``source`` (comments, docstrings, layout do not
    count)."""
    return _digest(normalised_tokens(source))


# --- modules and their units ---------------------------------------------------------------------

@dataclass
class Unit:
    """One unit of a module: its key, its top-level statements (or lambda), its hash."""

    key: str
    path: Path
    nodes: list[Any]  # ast statements, or one ast.Lambda
    kind: str  # function | class | value | toplevel | lambda
    hash: str = ""


@dataclass
class ModuleInfo:
    """A module's units, and how its top-level names resolve (its imports)."""

    name: str
    path: Path
    source: str
    tree: ast.Module
    units: dict[str, Unit] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)  # name -> unit keys
    imports: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    lambdas: list[tuple[int, Unit, ast.Lambda]] = field(default_factory=list)  # line, unit, node
    digest: str = ""  # of the whole module's token stream (what source_hash gives)


def _import_targets(node: ast.Import | ast.ImportFrom,
                    package: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(bound name, ("module", m) | ("attr", m, name) | ("star", m))."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                yield a.asname, ("module", a.name)
            else:
                top = a.name.split(".")[0]
                yield top, ("module", top)
        return
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    for a in node.names:
        if a.name == "*":
            yield "*", ("star", base)
        else:
            yield a.asname or a.name, ("attr", base, a.name)


def _target_names(target: ast.AST) -> tuple[list[str], list[str]]:
    """(names bound, names whose value is filled: ``X[k] = …``, ``X.a = …``) by a target."""
    if isinstance(target, ast.Name):
        return [target.id], []
    if isinstance(target, ast.Tuple | ast.List):
        return _all_target_names(target.elts)
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, ast.Subscript | ast.Attribute):
        base = target.value
        while isinstance(base, ast.Subscript | ast.Attribute):
            base = base.value
        return [], [base.id] if isinstance(base, ast.Name) else []
    return [], []


def _all_target_names(targets: list[ast.expr]) -> tuple[list[str], list[str]]:
    """:func:`_target_names` of several targets (``a, b = …``; ``a = b = …``), concatenated."""
    bound: list[str] = []
    filled: list[str] = []
    for t in targets:
        b, f = _target_names(t)
        bound, filled = bound + b, filled + f
    return bound, filled


def _statement_names(stmt: ast.stmt) -> tuple[list[str], list[str]]:
    """(names a top-level statement binds, names it fills)."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name], []
    if isinstance(stmt, ast.Assign):
        return _all_target_names(stmt.targets)
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return _target_names(stmt.target)
    if isinstance(stmt, ast.Expr):  # X.update(...), X.append(...)
        call = stmt.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            return _target_names(call.func)
        return [], []
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [], []
    bound = []
    for node in ast.walk(stmt):  # if / try / with / for: what they bind anywhere inside
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.append(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.append(node.id)
    return bound, []


def _lambda_paths(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.Lambda]]:
    """The lambdas inside a module-level value, each named by where it sits:
    ``DATASETS['laplace'].load`` (a dict key, then a keyword), ``ENCODERS['clip'](0)``."""
    if isinstance(node, ast.Lambda):
        yield prefix, node
        yield from _lambda_paths(node.body, f"{prefix}.<lambda>")
    elif isinstance(node, ast.Dict):
        for i, (k, v) in enumerate(zip(node.keys, node.values, strict=True)):
            label = repr(k.value) if isinstance(k, ast.Constant) else str(i)
            yield from _lambda_paths(v, f"{prefix}[{label}]")
    elif isinstance(node, ast.Call):
        yield from _lambda_paths(node.func, prefix)
        for i, a in enumerate(node.args):
            yield from _lambda_paths(a, f"{prefix}({i})")
        for kw in node.keywords:
            yield from _lambda_paths(kw.value, f"{prefix}.{kw.arg or '**'}")
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for i, e in enumerate(node.elts):
            yield from _lambda_paths(e, f"{prefix}[{i}]")
    else:
        for child in ast.iter_child_nodes(node):
            yield from _lambda_paths(child, prefix)


def _target_label(target: ast.AST) -> str:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        return f"{_target_label(target.value)}[{target.slice.value!r}]"
    if isinstance(target, ast.Attribute):
        return f"{_target_label(target.value)}.{target.attr}"
    return "<target>"


def _fills_registry(targets: list[tuple[str, ...]]) -> bool:
    """Whether a name imported as ``targets`` is a registry table (:data:`REGISTRIES`), as in a
    loss's own module: ``LOSSES["dcl"] = LossSpec(...)``. Such a statement is the entry the
    cells of that loss reach (:func:`_entry`: its fields as data, its functions followed), not
    code every importer of the module runs."""
    return bool(targets) and all(t[0] == "attr" and f"{t[1]}:{t[2]}" in REGISTRIES
                                 for t in targets)


def _analyse(name: str, path: Path, source: str) -> ModuleInfo:
    tree = ast.parse(source)
    info = ModuleInfo(name, path, source, tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    docstrings = _docstring_nodes(tree)
    body = tree.body[1:] if tree.body and tree.body[0] in docstrings else tree.body
    statements: dict[str, list[ast.stmt]] = {}
    kinds: dict[str, str] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias, target in _import_targets(node, package):
                    info.imports.setdefault(alias, []).append(target)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                break  # imports inside a function are resolved with its unit
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        bound, filled = _statement_names(stmt)
        if not bound and filled and all(_fills_registry(info.imports.get(n, [])) for n in filled):
            continue  # an entry of a registry table: a cell reaches its own entry only
        filled = [n for n in filled if n not in info.imports]
        names = list(dict.fromkeys(bound + filled)) or [TOPLEVEL]
        for n in names:
            statements.setdefault(n, []).append(stmt)
            kinds.setdefault(n, "function"
                             if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                             else "class" if isinstance(stmt, ast.ClassDef)
                             else "toplevel" if n == TOPLEVEL else "value")
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            value: ast.AST | None
            if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                prefix, value = _target_label(targets[0]), stmt.value
            else:
                prefix, value = TOPLEVEL, stmt
            seen: dict[str, int] = {}
            for label, lam in _lambda_paths(value, prefix) if value is not None else ():
                seen[label] = seen.get(label, 0) + 1
                key = f"{name}:{label}" + (f"#{seen[label]}" if seen[label] > 1 else "")
                unit = Unit(key, path, [lam], "lambda")
                info.units[key] = unit
                info.lambdas.append((lam.lineno, unit, lam))
    for n, stmts in statements.items():
        key = f"{name}:{n}"
        info.units[key] = Unit(key, path, stmts, kinds[n])
        info.names[n] = [key]
    lines = io.StringIO(source).readlines()
    tokens = _stream(source, docstrings)
    info.digest = _digest(t[2] for t in tokens)
    starts = [t[0] for t in tokens]
    for unit in info.units.values():
        parts: list[str] = []
        for node in unit.nodes:
            a, b = _span(lines, node)
            lo, hi = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
            parts += [t[2] for t in tokens[lo:hi]]
        unit.hash = _digest(parts)[:HASH_CHARS]
    return info


# --- where sources come from (files, or a test's overrides) --------------------------------------

_OVERRIDES: dict[Path, str] = {}
_ANALYSED: dict[tuple[Path, str], ModuleInfo] = {}  # (path, sha of the source) -> analysis
_CURRENT: dict[tuple[Path, bool], ModuleInfo] = {}  # (path, as loaded) -> its analysis now
_FINGERPRINTS: dict[Any, tuple[Fingerprint, list[Any]]] = {}  # (+ the specs: ids stay theirs)
_EDGES: dict[str, tuple[str, tuple[str, ...]]] = {}
_CODE_KEYS: dict[tuple[types.CodeType, str], str] = {}  # loaded code -> its unit (never changes)
_REACH: dict[str, frozenset[str]] = {}
_PLUGIN_PACKAGES: set[str] = set()
_PLUGIN_DIRS: set[Path] = set()


@contextlib.contextmanager
def source_overrides(sources: Mapping[Path | str, str]) -> Iterator[None]:
    """Fingerprint as if the files ``sources`` names held the given text (tests: generated
    edits without touching the real files). Runtime objects still map to the loaded code."""
    saved = dict(_OVERRIDES)
    _set_overrides({**saved, **{Path(p).resolve(): s for p, s in sources.items()}})
    try:
        yield
    finally:
        _set_overrides(saved)


def _bindings(path: Path) -> Any:
    name = module_of_path(path)
    if name is None:  # a plugin's file: no cheap way to know its name; assume it changed
        return object()
    info = _info_at(name, path)
    return sorted(info.names), sorted((k, v) for k, v in info.imports.items())


def _set_overrides(new: Mapping[Path, str]) -> None:
    """Use ``new``; what was computed from other sources is forgotten (the references between
    units only when an edit changes what a module binds or imports)."""
    paths = {p for p in new.keys() | _OVERRIDES.keys() if new.get(p) != _OVERRIDES.get(p)}
    before = {p: _bindings(p) for p in paths}
    _OVERRIDES.clear()
    _OVERRIDES.update(new)
    _forget()
    if any(_bindings(p) != before[p] for p in paths):
        _refs_cached.cache_clear()


def _forget() -> None:
    _FINGERPRINTS.clear()
    _EDGES.clear()
    _REACH.clear()
    for key in [k for k in _CURRENT if not k[1]]:
        del _CURRENT[key]


@functools.cache
def _disk_source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _info_at(name: str, path: Path, loaded: bool = False) -> ModuleInfo:
    info = _CURRENT.get((path, loaded))
    if info is None:
        source = _disk_source(path) if loaded else _OVERRIDES.get(path) or _disk_source(path)
        key = (path, hashlib.sha256(source.encode()).hexdigest())
        if key not in _ANALYSED:
            _ANALYSED[key] = _analyse(name, path, source)
        info = _CURRENT[(path, loaded)] = _ANALYSED[key]
    return info


@functools.cache
def _project_path(name: str) -> Path | None:
    parts = name.split(".")
    base = PROJECT_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate.resolve()
    return None


def _is_project(name: str) -> bool:
    return name == PROJECT or name.startswith(PROJECT + ".")


@functools.cache
def _other_path(name: str) -> Path | None:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None)
    if origin is None and name.split(".")[0] not in sys.stdlib_module_names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
    return Path(origin).resolve() if origin and origin.endswith(".py") else None


def _module_path(name: str) -> Path | None:
    """The source file of a followed module (the project's or a plugin's), else None."""
    if _is_project(name):
        return _project_path(name)
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or not (top in _PLUGIN_PACKAGES or _PLUGIN_DIRS):
        return None
    path = _other_path(name)
    if path is None:
        return None
    installed = bool({"site-packages", "dist-packages"} & set(path.parts))
    if top in _PLUGIN_PACKAGES or (not installed and any(d in path.parents for d in _PLUGIN_DIRS)):
        return path  # (beside a file plugin: not what is installed, e.g. a .venv in its folder)
    return None


def _info(name: str) -> ModuleInfo | None:
    path = _module_path(name)
    return _info_at(name, path) if path is not None else None


def _add_plugin(module: str) -> None:
    """Follow a plugin's own modules: its package's, or (a top-level module or a ``.py`` file)
    the modules beside its file."""
    if _is_project(module) or module.split(".")[0] in _PLUGIN_PACKAGES:
        return
    path = _other_path(module)
    if path is None:
        return
    _PLUGIN_PACKAGES.add(module.split(".")[0])
    if "." not in module and not {"site-packages", "dist-packages"} & set(path.parts):
        _PLUGIN_DIRS.add(path.parent)


# --- following names -----------------------------------------------------------------------------

Target = tuple[str, str]  # ("unit", key) | ("module", name)


def _resolve_attr(module: str, attr: str, depth: int = 0) -> list[Target]:
    """What ``module.attr`` is: a unit of the module, what it imported under that name, or its
    submodule."""
    info = _info(module)
    if info is None or depth > 20:
        return []
    out: list[Target] = [("unit", k) for k in info.names.get(attr, [])]
    for target in info.imports.get(attr, []):
        out += _import_target(target, depth + 1)
    if not out and _module_path(f"{module}.{attr}") is not None:
        out.append(("module", f"{module}.{attr}"))
    if not out:
        for star in info.imports.get("*", []):
            out += _resolve_attr(star[1], attr, depth + 1)
    return out


def _import_target(target: tuple[str, ...], depth: int = 0) -> list[Target]:
    if target[0] == "module":
        return [("module", target[1])] if _module_path(target[1]) is not None else []
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


@functools.cache
def _refs_cached(module: str, source_id: int, key: str) -> tuple[str, ...]:
    info = _info(module)
    assert info is not None and id(info) == source_id
    unit = info.units[key]
    package = module if info.path.name == "__init__.py" else module.rpartition(".")[0]
    local: dict[str, list[tuple[str, ...]]] = {}
    for root in unit.nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for bound, target in _import_targets(node, package):
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
                mod = _info(name)
                out += list(mod.units) if mod is not None else []
    return tuple(k for k in dict.fromkeys(out) if k != key and k not in REGISTRIES)


def _refs(key: str) -> tuple[str, ...]:
    module = key.split(":", 1)[0]
    info = _info(module)
    if info is None or key not in info.units:
        return ()
    return _refs_cached(module, id(info), key)


def _unit(key: str) -> Unit | None:
    info = _info(key.split(":", 1)[0])
    return info.units.get(key) if info is not None else None


def _edges(key: str) -> tuple[str, tuple[str, ...]]:
    """(hash of the unit, the units it leads to: its references and the top-level statements of
    its module and of that module's packages, which run when it is imported)."""
    if key not in _EDGES:
        unit = _unit(key)
        if unit is None:
            raise ValueError(f"code fingerprint: {key!r} is not a unit of a followed module "
                             "(renamed or moved? see pipeline.fingerprint.TRAINING_ROOTS)")
        parts = key.split(":", 1)[0].split(".")
        tops = [f"{'.'.join(parts[:i])}:{TOPLEVEL}" for i in range(1, len(parts) + 1)]
        _EDGES[key] = unit.hash, (*_refs(key), *(t for t in tops if t != key and _unit(t)))
    return _EDGES[key]


def _reach(root: str) -> frozenset[str]:
    """The units ``root`` reaches, itself included (memoised per root)."""
    if root not in _REACH:
        seen = {root}
        todo = [root]
        while todo:
            for nxt in _edges(todo.pop())[1]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        _REACH[root] = frozenset(seen)
    return _REACH[root]


def _closure(roots: Iterable[str]) -> dict[str, str]:
    """``{key: hash}`` of the roots and every unit they reach."""
    keys: set[str] = set()
    for root in roots:
        keys |= _reach(root)
    return {k: _edges(k)[0] for k in keys}


# --- runtime objects (registry entries) to units -------------------------------------------------

def _code_key(code: types.CodeType, module: str) -> str | None:
    """The unit that defines ``code`` (a function, method, closure or lambda of ``module``)."""
    if (code, module) not in _CODE_KEYS:
        key = _find_code_key(code, module)
        if key is None:  # not (yet) followed code: not remembered
            return None
        _CODE_KEYS[(code, module)] = key
    return _CODE_KEYS[(code, module)]


def _find_code_key(code: types.CodeType, module: str) -> str | None:
    path = _module_path(module)
    if path is None or Path(code.co_filename).resolve() != path:
        return None
    info = _info_at(module, path, loaded=True)  # where the loaded code's line numbers point
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
        info = _info(module)
        head = obj.__qualname__.split(".")[0]
        return [f"{module}:{head}"] if info is not None and f"{module}:{head}" in info.units else []
    if hasattr(obj, "__wrapped__"):
        return object_keys(obj.__wrapped__, depth + 1)
    if callable(obj) and not isinstance(obj, types.BuiltinFunctionType):
        return object_keys(type(obj), depth + 1)
    return []


def _describe(value: Any) -> Any:
    """An entry's field as JSON: code as its unit keys, data as itself."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _describe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_describe(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if callable(value):
        return {"code": sorted(object_keys(value))}
    text = repr(value)
    return type(value).__qualname__ if " at 0x" in text else text


def _entry(table: str, name: str, spec: Any) -> tuple[str, str, list[str]]:
    """(key, hash, the units it names) of one registry entry: its fields as data, its callables
    and classes as code."""
    values = ({f.name: getattr(spec, f.name) for f in fields(spec)} if is_dataclass(spec)
              else dict(vars(spec)) if hasattr(spec, "__dict__") else {"value": spec})
    code = [type(spec), *(v for v in values.values() if callable(v))]
    for obj in code:  # a plugin's entry: its module and its package are followed
        _add_plugin(getattr(obj, "__module__", None) or "")
    roots = [k for obj in code for k in object_keys(obj)]
    blob = json.dumps({k: _describe(v) for k, v in values.items()}, sort_keys=True)
    return f"{table}[{name!r}]", _digest([blob])[:HASH_CHARS], roots


# --- fingerprints --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fingerprint:
    """The code that makes a cell's files: ``functions`` (unit key -> hash of its code),
    ``modules`` (module -> hash over its units here) and ``digest`` (12 hex) over them."""

    digest: str
    modules: Mapping[str, str]
    functions: Mapping[str, str]

    def changed(self, other: Mapping[str, Any]) -> list[str]:
        """The modules whose units here differ from a recorded :meth:`as_record` (the units
        themselves: :meth:`changed_units`)."""
        theirs = other.get("modules", {}) if isinstance(other, Mapping) else {}
        mine = dict(self.modules)
        return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))

    def changed_units(self, other: Mapping[str, Any]) -> list[str]:
        """The unit keys whose code differs from a recorded :meth:`as_record`."""
        theirs = other.get("functions", {}) if isinstance(other, Mapping) else {}
        mine = dict(self.functions)
        return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))

    def as_record(self) -> dict[str, Any]:
        """What ``cell.json`` records (``code_fingerprint``): one dict per fingerprint, shared by
        its cells (a 10 000-cell grid holds a few of them, not one each): do not change it."""
        return self._record

    @functools.cached_property
    def _record(self) -> dict[str, Any]:
        return {"digest": self.digest, "modules": dict(self.modules),
                "functions": dict(self.functions)}


def fingerprint(roots: Iterable[str],
                entries: Mapping[str, tuple[str, list[str]]] | None = None) -> Fingerprint:
    """The fingerprint of the units ``roots`` and what they reach, with registry ``entries``
    (key -> (hash of its data, the units it names), which are followed too)."""
    entries = entries or {}
    units = _closure([*roots, *(k for _, names in entries.values() for k in names)])
    units.update({key: digest for key, (digest, _) in entries.items()})
    by_module: dict[str, dict[str, str]] = {}
    for key, digest in units.items():
        by_module.setdefault(key.split(":", 1)[0], {})[key] = digest
    modules = {m: _digest(f"{k}={v}" for k, v in sorted(u.items()))[:HASH_CHARS]
               for m, u in sorted(by_module.items())}
    digest = _digest(f"{k}={v}" for k, v in sorted(units.items()))[:12]
    return Fingerprint(digest, modules, dict(sorted(units.items())))


def function_hash(fn: Callable[..., Any]) -> str:
    """The hash of the unit that defines ``fn`` (its code; '' when it is not followed code)."""
    keys = object_keys(fn)
    unit = _unit(keys[0]) if keys else None
    return unit.hash if unit is not None else ""


def cell_entries(cell: Any) -> list[tuple[str, str, Any]]:
    """(registry table key, entry name, spec) of every registry entry ``cell`` uses."""
    from pipeline.datasets.augment import AUGMENTATIONS
    from pipeline.datasets.registry import DATASETS
    from pipeline.encoders.registry import ENCODERS
    from pipeline.losses.registry import LOSSES
    from pipeline.losses.schedules import SCHEDULES

    out: list[tuple[str, str, Any]] = []
    if cell.objective == "contrastive":
        for table, registry, name in (("LOSSES", LOSSES, cell.loss),
                                      ("SCHEDULES", SCHEDULES, cell.tau_schedule)):
            if name in registry:
                out.append((f"{REGISTRY_MODULES[table]}:{table}", name, registry[name]))
    if cell.arch in ENCODERS:
        out.append((f"{REGISTRY_MODULES['ENCODERS']}:ENCODERS", cell.arch, ENCODERS[cell.arch]))
    data = DATASETS.get(cell.data.name)
    if data is not None:
        out.append((f"{REGISTRY_MODULES['DATASETS']}:DATASETS", cell.data.name, data))
        if data.augmentation in AUGMENTATIONS:
            out.append((f"{REGISTRY_MODULES['AUGMENTATIONS']}:AUGMENTATIONS", data.augmentation,
                        AUGMENTATIONS[data.augmentation]))
    return out



def code_fingerprint(cell: Any) -> Fingerprint:
    """The fingerprint of the code that trains ``cell`` (a :class:`pipeline.grid.Cell`) and
    writes its files: :data:`TRAINING_ROOTS` and the cell's registry entries, followed (see the
    module docstring). Computed once per distinct set of entries."""
    used = cell_entries(cell)
    cache_key = tuple((table, name, id(spec)) for table, name, spec in used)
    if cache_key not in _FINGERPRINTS:
        entries = {}
        for table, name, spec in used:
            key, digest, roots = _entry(table, name, spec)
            entries[key] = (digest, roots)
        _FINGERPRINTS[cache_key] = (fingerprint(TRAINING_ROOTS, entries), [s for *_, s in used])
    return _FINGERPRINTS[cache_key][0]


# --- for tests: units and executed code ---------------------------------------------------------

def module_units(module: str) -> dict[str, Unit]:
    """The units of a followed module (as its current source has them)."""
    info = _info(module)
    return dict(info.units) if info is not None else {}


def module_source(module: str) -> tuple[Path, str] | None:
    """(file, source) of a followed module, as the fingerprint reads it now (overrides too)."""
    info = _info(module)
    return (info.path, info.source) if info is not None else None


def module_of_path(path: Path | str) -> str | None:
    """The dotted name of a project module's file, else None."""
    path = Path(path).resolve()
    if PROJECT_DIR not in path.parents or path.suffix != ".py":
        return None
    parts = [PROJECT, *path.relative_to(PROJECT_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of_code(code: types.CodeType, module: str) -> str | None:
    """The innermost unit whose source holds ``code`` (a function, lambda, comprehension or class
    body that ran), else None (e.g. a module's own body)."""
    path = _module_path(module)
    if path is None or code.co_name == "<module>" or Path(code.co_filename).resolve() != path:
        return None
    info = _info_at(module, path, loaded=True)
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
