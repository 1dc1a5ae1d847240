"""A suite file (``suites/<name>.yaml``): many tasks, one run, one leaderboard across them.

A suite names its tasks; each task is a dataset with its options and augmentation, the encoders
and whatever grid keys differ from the suite's own. Every task's params are

    params.yaml  ⊕  the suite's ``params:``  ⊕  the task's own keys

(``⊕`` is :func:`pipeline.config.load.merge`, the profile rule), validated like any params file.
A task that names another dataset than the suite's does not inherit the suite's ``data.options``
and ``data.augment`` (they are the other dataset's): its own, or its dataset's defaults, apply.
Every problem of every task is reported at once, before anything is written or run, each line
naming the suite file and the task (``suites/cpu.yaml: tasks[mnist].grid.k = ...``).

A task's *type* is what the aggregate groups tasks by (``mean_<type>`` in the suite
leaderboard): ``vectors`` or ``images``, the dataset's kind, with ``labelled`` true when the
dataset has class labels (the probes run only there). A suite file may state ``type``; a type
that contradicts the dataset's kind is an error.

The comparison across tasks needs one scale and one way of choosing: ``report.primary``,
``report.group_by``, ``report.level``, ``report.alpha`` and ``report.bootstrap`` must be the same
for every task (set them in the suite's ``params:``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.config.entries import validation_lines
from pipeline.config.load import ConfigError, expand, from_mapping, merge, read_yaml
from pipeline.config.sections import Params
from pipeline.datasets.registry import DATASETS
from pipeline.plugins import load_plugins

TASK_TYPES = {"vector": "vectors", "image": "images"}  # the dataset's kind -> the task type
NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,39}$")  # a folder and a DVC stage name
RESERVED = ("reports",)  # runs/<suite>/reports/ is the board across tasks
SHARED_REPORT_KEYS = ("primary", "group_by", "level", "alpha", "bootstrap", "compare")
# what a task may not set: keys that would make it a different benchmark from the suite's
SUITE_ONLY = ("plugins", "tracking", "compute")


class _TaskFile(BaseModel):
    """One task as written: a name, an optional type, and params keys laid over the suite's."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    name: str = Field(description="the task's name: its folder under runs/<suite>/ and its "
                                  "column in the suite leaderboard")
    type: str | None = Field(None, description="vectors | images (default: the dataset's kind)")


class _SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    name: str | None = Field(None, description="the suite's name (default: the file's stem)")
    description: str = Field("", description="one line on what the suite is for")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="keys laid over params.yaml for every task")
    tasks: list[dict[str, Any]] = Field(min_length=1, description="the tasks, in board order")


@dataclass(frozen=True)
class Task:
    """One task of a suite: its name, type, whether it has class labels, the params mapping it
    runs with (params.yaml ⊕ suite ⊕ task, as written: ``raw``) and those params validated."""

    name: str
    type: str  # vectors | images
    labelled: bool
    raw: Mapping[str, Any]
    params: Params

    @property
    def dataset(self) -> str:
        return self.params.data.name

    @cached_property
    def cells(self) -> int:
        """How many cells the task's grid has (expanded once)."""
        return len(expand(self.params))


@dataclass(frozen=True)
class Suite:
    """A validated suite: its name, file, description and tasks (in the file's order)."""

    name: str
    path: Path
    description: str
    tasks: tuple[Task, ...]

    @property
    def report(self) -> Any:
        """The report settings every task shares (checked equal on the keys that matter)."""
        return self.tasks[0].params.report


def _type_of(task: _TaskFile, params: Params, where: str) -> tuple[str, list[str]]:
    kind = TASK_TYPES[DATASETS[params.data.name].kind]
    if task.type is not None and task.type != kind:
        allowed = f"{kind!r} (dataset {params.data.name!r} is of kind {kind!r})"
        return kind, [f"{where}.type = {task.type!r}: must match the dataset; allowed: {allowed}"]
    return kind, []


def _for_dataset(base: Mapping[str, Any], own: Mapping[str, Any]) -> Mapping[str, Any]:
    """``base`` without its ``data.options`` and ``data.augment`` when the task names another
    dataset: they are the other dataset's (the task's own, or its dataset's defaults, apply)."""
    data, theirs = base.get("data"), own.get("data")
    if not (isinstance(data, Mapping) and isinstance(theirs, Mapping)
            and "name" in theirs and theirs["name"] != data.get("name")):
        return base
    return {**base, "data": {**data, "options": {}, "augment": {}}}


def _task(entry: Any, i: int, base: Mapping[str, Any], where: str,
          seen: set[str]) -> tuple[Task | None, list[str]]:
    """The ``i``-th task of the file validated, or None and the problems (a line each)."""
    at = f"{where}: tasks[{i}]"
    if not isinstance(entry, dict):
        return None, [f"{at} = {entry!r}: expected a mapping with a name and params keys"]
    try:
        task = _TaskFile.model_validate(entry)
    except ValidationError as err:
        return None, validation_lines(err, entry, at)
    if not NAME.match(task.name):
        return None, [f"{at}.name = {task.name!r}: a task's name is 1-40 characters of a-z, 0-9 "
                      "and _ starting with a letter or digit (it names a folder and DVC stages)"]
    at = f"{where}: tasks[{task.name}]"
    problems: list[str] = []
    if task.name in RESERVED:
        problems.append(f"{at}.name = {task.name!r}: reserved (runs/<suite>/{task.name}/ holds "
                        "the board across tasks); choose another name")
    if task.name in seen:
        problems.append(f"{at}.name = {task.name!r}: two tasks have this name; names are unique")
    seen.add(task.name)
    own = {k: v for k, v in entry.items() if k not in ("name", "type")}
    for key in SUITE_ONLY:
        if key in own:
            problems.append(f"{at}.{key} = {own[key]!r}: set in the suite's params, not per task "
                            f"({', '.join(SUITE_ONLY)} are the same for every task)")
    raw = merge(_for_dataset(base, own), own)
    try:
        params = from_mapping(raw)
    except ConfigError as err:
        return None, problems + [f"{at}.{line}" for line in str(err).splitlines()]
    kind, wrong = _type_of(task, params, at)
    problems += wrong
    if problems:
        return None, problems
    labelled = DATASETS[params.data.name].labels == "class"
    return Task(task.name, kind, labelled, raw, params), []


def _shared_report(tasks: list[Task], where: str) -> list[str]:
    """The report keys every task must share, one line per key that differs."""
    lines = []
    for key in SHARED_REPORT_KEYS:
        values = {t.name: getattr(t.params.report, key) for t in tasks}
        if len({repr(v) for v in values.values()}) > 1:
            lines.append(f"{where}: report.{key} differs between tasks ({values}): the board "
                         "across tasks needs one value; set it in the suite's params")
    return lines


def load_suite(path: str | Path, params_path: str | Path = "params.yaml") -> Suite:
    """Read and validate the suite file ``path`` over ``params_path``; raises
    :class:`ConfigError` listing every problem of every task before anything is run."""
    path = Path(path)
    where = str(path)
    raw = read_yaml(path)
    try:
        spec = _SuiteFile.model_validate(raw)
    except ValidationError as err:
        lines = validation_lines(err, raw, unknown="unknown key; a suite has name, "
                                 "description, params, tasks")
        raise ConfigError("\n".join(f"{where}: {line}" for line in lines)) from None
    name = spec.name if spec.name is not None else path.stem
    if not NAME.match(name):
        raise ConfigError(f"{where}: name = {name!r}: a suite's name is 1-40 characters of a-z, "
                          "0-9 and _ (it names the folder runs/<name>/)")
    base = merge(read_yaml(params_path), spec.params)
    plugins = base.get("plugins", [])
    if isinstance(plugins, list) and all(isinstance(x, str) for x in plugins):
        try:
            load_plugins(plugins)
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
    problems: list[str] = []
    tasks: list[Task] = []
    seen: set[str] = set()
    for i, entry in enumerate(spec.tasks):
        task, lines = _task(entry, i, base, where, seen)
        problems += lines
        if task is not None:
            tasks.append(task)
    if not problems:
        problems = _shared_report(tasks, where)
    if problems:
        raise ConfigError("\n".join(problems))
    return Suite(name, path, spec.description, tuple(tasks))
