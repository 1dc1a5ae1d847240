"""``cbench diff A B``: what changed from A to B, each a release folder or a workspace (a folder
with reports/cells.csv, e.g. ``.``): cells added, removed and retrained by other code, headline
numbers that moved beyond their interval over seeds, tiers and the order of ranks. Markdown on
stdout, for a pull-request comment; ``--fail-on-change`` exits 1 when anything changed (a CI
gate)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.common import Command, Parser, UsageError


def configure(parser: Parser) -> None:
    parser.add_argument("a", type=Path, metavar="A", help="before: a release folder or workspace")
    parser.add_argument("b", type=Path, metavar="B", help="after: a release folder or workspace")
    parser.add_argument("--fail-on-change", action="store_true",
                        help="exit 1 when anything changed")
    parser.add_argument("--output", "-o", type=Path, help="write the Markdown here too")


def run(args: argparse.Namespace) -> int:
    from pipeline.release.bundle import ReleaseError
    from pipeline.release.diff import diff, side, to_markdown

    try:
        d = diff(side(args.a), side(args.b))
    except ReleaseError as err:
        raise UsageError(str(err)) from None
    text = to_markdown(d)
    print(text, end="")
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 1 if args.fail_on_change and d.changed else 0


COMMAND = Command("what changed between two releases, or a release and the workspace",
                  configure, run, __doc__)
