"""A module's code units: its source read into a normalised token stream, cut into units, each
hashed (see :mod:`pipeline.fingerprint` for what a unit is and what counts in its hash).

Pure stdlib and no import of the rest of the package: ``tests/test_fingerprint.py`` loads this
file alone under other Python versions to check that they hash every module alike.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import io
import keyword
import textwrap
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    """The token stream that is hashed: comments, layout and docstrings gone (see the package
    docstring); the same list under Python 3.11, 3.12 and 3.13."""
    source = textwrap.dedent(source)
    return [t[2] for t in _stream(source, _docstring_nodes(ast.parse(source)))]


def digest_of(parts: Iterable[str]) -> str:
    """SHA-256 (hex) of ``parts`` joined by NUL: of a token stream, a unit list, an entry's data."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def source_hash(source: str) -> str:
    """SHA-256 of the normalised token stream of ``source`` (comments, docstrings, layout do not
    count)."""
    return digest_of(normalised_tokens(source))


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


def import_targets(node: ast.Import | ast.ImportFrom,
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
    cells of that loss reach (``digest._entry``: its fields as data, its functions followed), not
    code every importer of the module runs."""
    return bool(targets) and all(t[0] == "attr" and f"{t[1]}:{t[2]}" in REGISTRIES
                                 for t in targets)


def analyse(name: str, path: Path, source: str) -> ModuleInfo:
    """Module ``name`` (its file ``path``, its text ``source``) cut into units, each hashed."""
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
                for alias, target in import_targets(node, package):
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
    info.digest = digest_of(t[2] for t in tokens)
    starts = [t[0] for t in tokens]
    for unit in info.units.values():
        parts: list[str] = []
        for node in unit.nodes:
            a, b = _span(lines, node)
            lo, hi = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
            parts += [t[2] for t in tokens[lo:hi]]
        unit.hash = digest_of(parts)[:HASH_CHARS]
    return info
