"""What every ``cbench`` subcommand shares: the one way to fail, the parser that fails that way,
a subcommand's entry, and the shared options.

This module imports nothing from :mod:`pipeline.cli`: the subcommand modules import it, and
:mod:`pipeline.cli.app` imports them (``tests/test_cli_package.py`` checks the graph).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pipeline.config import ReportConfig

USAGE_EXIT = 2  # the exit code of every UsageError (argparse's own, too)


class UsageError(Exception):
    """A command line that cannot run: a bad argument, a missing file, a name that is not there.

    The one exception a subcommand raises to fail: :func:`pipeline.cli.app.main` prints it as
    one line on stderr, ``cbench <command>: <message>``, without a traceback, and returns
    :data:`USAGE_EXIT`. The message says what to do (``--params x.yaml: no such file; ...``).
    """


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors (an unknown option, a missing argument, a bad value)
    are :class:`UsageError`: argparse's messages take the same path as the subcommands'.
    Subparsers are of this class too (argparse makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


@dataclass(frozen=True)
class Command:
    """One subcommand: its one-line ``help``, ``configure`` (adds its arguments to its parser),
    ``run`` (the parsed arguments -> the exit code; fails by raising :class:`UsageError`) and
    ``doc`` (its module's docstring: the first paragraph heads its ``--help``)."""

    help: str
    configure: Callable[[Parser], None]
    run: Callable[[argparse.Namespace], int]
    doc: str | None = None


def add_params(parser: Parser, what: str) -> None:
    """``--params YAML`` (default ``params.yaml``): the params file whose ``report:`` section
    gives the subcommand's defaults, ``what`` (for the help)."""
    parser.add_argument("--params", default="params.yaml", metavar="YAML",
                        help=f"params file: {what} (default: params.yaml)")


def report_config(path: str | Path, **overrides: Any) -> ReportConfig:
    """``report:`` of a params file (``params.resolved.yaml`` or ``params.yaml``) as a
    :class:`pipeline.config.ReportConfig`, with ``overrides`` (None values ignored)."""
    from pydantic import ValidationError

    from pipeline.config import ConfigError, ReportConfig, read_yaml

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--params {path}: no such file; run from the project folder or name "
                         "its params.yaml")
    try:
        section = dict(read_yaml(path)["report"])
    except (ConfigError, KeyError, TypeError) as exc:
        raise UsageError(f"--params {path}: no readable report: section ({exc})") from None
    section |= {k: v for k, v in overrides.items() if v is not None}
    try:
        return ReportConfig.model_validate(section)
    except ValidationError as exc:
        raise UsageError(f"--params {path}: report: {exc.errors()[0]['msg']}") from None
