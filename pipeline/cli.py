"""``cbench``: run one stage, print the leaderboard, or compare two variants in the terminal."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

STAGES = ("resolve", "prepare", "train", "stats", "search", "bounds", "geometry", "report")


def _leaderboard(args: argparse.Namespace) -> int:
    import pandas as pd

    from pipeline.report.leaderboard import MARKDOWN_COLUMNS, to_markdown

    path = Path(args.csv)
    if not path.exists():
        print(f"--csv {path}: no leaderboard yet; run `make run` first", file=sys.stderr)
        return 2
    board = pd.read_csv(path)
    for expr in args.filter:
        key, _, value = expr.partition("=")
        if key not in board.columns or not value:
            print(f"--filter {expr!r}: expected COLUMN=VALUE with COLUMN in {list(board.columns)}",
                  file=sys.stderr)
            return 2
        board = board[board[key].astype(str) == value]
    if args.sort:
        if args.sort not in board.columns:
            print(f"--sort {args.sort!r}: unknown column; allowed: {list(board.columns)}", file=sys.stderr)
            return 2
        board = board.sort_values(args.sort, ascending=not args.desc, na_position="last")
    print(to_markdown(board.head(args.top) if args.top else board, MARKDOWN_COLUMNS), end="")
    return 0


def _schema(args: argparse.Namespace) -> int:
    """Print (or write) the JSON schema of params.yaml, or with --profile of a profile."""
    import json

    from pipeline.config import ConfigError, json_schema, read_yaml
    from pipeline.plugins import load_plugins

    if args.params:  # the plugins a params file names register their losses first
        try:
            load_plugins(read_yaml(args.params).get("plugins") or [])
        except (ConfigError, ValueError) as err:
            print(f"cbench schema: {err}", file=sys.stderr)
            return 2
    text = json.dumps(json_schema(partial=args.profile), indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text, end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    stage = sub.add_parser("stage", help="run one pipeline stage (as dvc repro would)")
    stage.add_argument("name", choices=STAGES)
    stage.add_argument("rest", nargs=argparse.REMAINDER)
    board = sub.add_parser("leaderboard", help="print the leaderboard, filtered and sorted")
    board.add_argument("--csv", default="reports/cells.csv")
    board.add_argument("--filter", action="append", default=[], metavar="COLUMN=VALUE")
    board.add_argument("--sort", metavar="COLUMN")
    board.add_argument("--desc", action="store_true", help="sort descending")
    board.add_argument("--top", type=int, default=0)
    sub.add_parser("compare", help="two variants side by side (see `cbench compare --help`)",
                   add_help=False)
    schema = sub.add_parser("schema", help="JSON schema of params.yaml for editors")
    schema.add_argument("--profile", action="store_true",
                        help="the schema of a profile (no key is required)")
    schema.add_argument("--params", help="load the plugins this params file names first")
    schema.add_argument("--output", "-o", help="write to this file instead of stdout")
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["compare"]:
        from pipeline.report.cli_compare import compare_main

        return compare_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "stage":
        return int(importlib.import_module(f"stages.{args.name}").main(args.rest))
    if args.command == "schema":
        return _schema(args)
    return _leaderboard(args)


if __name__ == "__main__":
    sys.exit(main())
