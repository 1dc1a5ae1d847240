"""``cbench stage NAME [ARG ...]``: run one pipeline stage, as ``dvc repro`` would
(``stages.<NAME>.main``; its arguments, and its messages about them, are the stage's own)."""

from __future__ import annotations

import argparse
import importlib

from pipeline.cli.common import Command, Parser

# In the order dvc.yaml runs them (suite_report: a suite's last stage, runs/<suite>/dvc.yaml);
# tests/test_cli_package.py keeps it equal to stages/*.py.
STAGES = ("resolve", "prepare", "train", "stats", "search", "bounds", "probe", "geometry",
          "report", "suite_report")


def configure(parser: Parser) -> None:
    parser.add_argument("name", choices=STAGES)
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace) -> int:
    return int(importlib.import_module(f"stages.{args.name}").main(args.rest))


COMMAND = Command("run one pipeline stage (as dvc repro would)",
                  configure, run, __doc__)
