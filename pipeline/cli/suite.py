"""``cbench suite``: validate a suite file (``suites/<name>.yaml``) and write its workspace and
its one DVC pipeline under ``runs/<name>/``; with ``--repro``, run it (``dvc repro``).

Every task is validated before anything is written: a bad key of any task fails the command
with every problem listed, each naming the suite file and the task. ``make run
SUITE=suites/<name>.yaml`` is ``cbench suite suites/<name>.yaml --repro``. The leaderboard
across tasks is ``runs/<name>/reports/suite.md`` (also .tex, .html, .csv).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pipeline.cli.common import Command, Parser, UsageError


def configure(parser: Parser) -> None:
    parser.add_argument("suite", metavar="SUITE_YAML", help="the suite file, e.g. suites/cpu.yaml")
    parser.add_argument("--params", default="params.yaml", metavar="YAML",
                        help="the params every task starts from (default: params.yaml)")
    parser.add_argument("--repro", action="store_true",
                        help="then run the suite's pipeline: dvc repro runs/<name>/dvc.yaml")


def run(args: argparse.Namespace) -> int:
    from pipeline.config import ConfigError
    from pipeline.config.suite import load_suite
    from pipeline.runtime.suite_plan import SUITE_OUT, write_suite

    if os.environ.get("CBENCH_PROFILE"):
        raise UsageError(f"CBENCH_PROFILE = {os.environ['CBENCH_PROFILE']!r}: a suite's tasks "
                         "hold their own params; set the profile's keys in the suite's params")
    if not (Path.cwd() / "dvc.yaml").is_file():
        raise UsageError(f"no dvc.yaml in {Path.cwd()}: run it from the project's root (a "
                         "suite's pipeline is made from the project's dvc.yaml)")
    if not Path(args.suite).is_file():
        raise UsageError(f"{args.suite}: no such suite file (see suites/*.yaml)")
    try:
        suite = load_suite(args.suite, args.params)
    except ConfigError as err:
        print(f"cbench suite: invalid suite ({args.suite} over {args.params}):\n{err}",
              file=sys.stderr)
        return 2
    pipeline = write_suite(suite, Path.cwd())
    total = sum(t.cells for t in suite.tasks)
    print(f"suite {suite.name}: {len(suite.tasks)} tasks, {total} cells -> {pipeline}")
    if not args.repro:
        return 0
    dvc = shutil.which("dvc")
    if dvc is None:
        raise UsageError("dvc is not on PATH: run it through `make run SUITE=...`, which uses "
                         "the project's .venv")
    code = subprocess.run([dvc, "repro", str(pipeline.relative_to(Path.cwd()))],
                          check=False).returncode
    if code == 0:
        board = pipeline.parent / SUITE_OUT / "suite.md"
        print(f"leaderboard across tasks: {board} (also .tex, .html, .csv)")
    return code


COMMAND = Command("validate a suite of tasks and write (or --repro: run) its DVC pipeline",
                  configure, run, __doc__)
