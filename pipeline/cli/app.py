"""``cbench``'s entry point: one parser for every subcommand, and the one place where a failure
becomes a message and an exit code.

Exit codes: 0 done; 1 ``cbench verify`` found a cell that does not reproduce, ``cbench release
--check`` a tampered release, ``cbench diff --fail-on-change`` a change; 2 a
:class:`~pipeline.cli.common.UsageError` (argparse's errors included), printed as one line on
stderr: ``cbench <command>: <message>``. ``cbench stage`` returns the stage's own code.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pipeline.cli import (
    compare,
    diff,
    leaderboard,
    release,
    schema,
    site,
    stage,
    suite,
    verify,
)
from pipeline.cli.common import USAGE_EXIT, Command, Parser, UsageError

COMMANDS: dict[str, Command] = {
    "stage": stage.COMMAND,
    "leaderboard": leaderboard.COMMAND,
    "compare": compare.COMMAND,
    "verify": verify.COMMAND,
    "schema": schema.COMMAND,
    "release": release.COMMAND,
    "diff": diff.COMMAND,
    "site": site.COMMAND,
    "suite": suite.COMMAND,
}


def parser() -> Parser:
    top = Parser(prog="cbench", description="contrastive-bench's command line; "
                 "`cbench COMMAND --help` describes each command")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        about = (command.doc or command.help).split("\n\n")[0].replace("``", "`")
        command.configure(sub.add_parser(name, help=command.help, description=about))
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """``cbench [COMMAND] ...``: returns the exit code (the console script exits with it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = f"cbench {argv[0]}" if argv and argv[0] in COMMANDS else "cbench"
    try:
        try:
            args = parser().parse_args(argv)
        except SystemExit as done:  # --help: argparse printed it
            return done.code if isinstance(done.code, int) else 0
        return COMMANDS[args.command].run(args)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return USAGE_EXIT
