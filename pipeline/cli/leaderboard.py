"""``cbench leaderboard [CSV ...]``: print (and merge) the leaderboard of one or more runs.

Reads one or more per-cell tables (``reports/cells.csv`` of runs on other machines, clusters or
commits; default the local one), merges them keeping each row's provenance (refusing different
code fingerprints of one cell unless ``--allow-mixed``), and prints the leaderboard in Markdown,
as the report stage writes it; ``--cells`` prints the cells. The table's settings
(``report.columns``, ``report.primary``, …) come from ``--params``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.cli.common import Command, Parser, UsageError, add_params, report_config

if TYPE_CHECKING:
    import pandas as pd


def configure(parser: Parser) -> None:
    parser.add_argument("csv", nargs="*", metavar="CSV",
                        help="per-cell tables to merge (default: reports/cells.csv)")
    add_params(parser, "its report: section shapes the table")
    parser.add_argument("--cells", action="store_true", help="one row per cell, not per setting")
    parser.add_argument("--filter", action="append", default=[], metavar="COLUMN=VALUE")
    parser.add_argument("--sort", metavar="COLUMN", help="rank by this metric (with --cells: "
                        "sort by any column)")
    parser.add_argument("--desc", action="store_true", help="with --cells --sort: descending")
    parser.add_argument("--top", type=int, help="rows shown (default: report.top)")
    parser.add_argument("--allow-mixed", action="store_true",
                        help="keep cells trained by different code as separate rows")
    parser.add_argument("--out", metavar="CSV", help="also write the merged per-cell table here")


def _read_tables(paths: list[str]) -> list[tuple[str, pd.DataFrame]]:
    import pandas as pd

    out = []
    for p in paths:
        if not Path(p).is_file():
            raise UsageError(f"{p}: no per-cell table; run `make run` first (it writes "
                             "reports/cells.csv)")
        out.append((p, pd.read_csv(p)))
    return out


def _filter(board: pd.DataFrame, exprs: list[str]) -> pd.DataFrame:
    for expr in exprs:
        key, _, value = expr.partition("=")
        if key not in board.columns or not value:
            raise UsageError(f"--filter {expr!r}: expected COLUMN=VALUE with COLUMN in "
                             f"{list(board.columns)}")
        board = board[board[key].astype(str) == value]
    if board.empty:
        raise UsageError(f"--filter {' '.join(exprs)}: no cell left")
    return board


def run(args: argparse.Namespace) -> int:
    from pipeline.metrics import is_metric
    from pipeline.report.grid.board import make_board
    from pipeline.report.grid.leaderboard import MixedRunsError, merge_runs
    from pipeline.report.grid.tables import axes_in, varying
    from pipeline.report.render.markdown import cells_table, to_markdown

    cfg = report_config(args.params, top=args.top)
    try:
        cells = merge_runs(_read_tables(args.csv or ["reports/cells.csv"]), args.allow_mixed)
    except MixedRunsError as exc:
        raise UsageError(str(exc)) from None
    split_by = cells.attrs.get("split_by", [])
    cells = _filter(cells, args.filter)
    if args.out:
        cells.to_csv(args.out, index=False)
    if args.sort and args.sort not in cells.columns:
        raise UsageError(f"--sort {args.sort!r}: unknown column; allowed: {list(cells.columns)}")
    if args.cells:
        if args.sort:
            cells = cells.sort_values(args.sort, ascending=not args.desc, na_position="last")
        shown = ["rank", *varying(cells, [a for a in axes_in(cells) if a != "seed"]), "seed",
                 *split_by, "status", *cfg.columns,
                 *(["source"] if len(args.csv or []) > 1 else [])]
        print(cells_table(cells.head(args.top) if args.top else cells, shown), end="")
        return 0
    if args.sort:
        if not is_metric(args.sort):
            raise UsageError(f"--sort {args.sort!r}: the leaderboard ranks by a metric; use "
                             "--cells to sort cells by any column")
        cfg = cfg.model_copy(update={"primary": args.sort})
    print(to_markdown(make_board(cells, cfg, split_by=split_by)), end="")
    return 0


COMMAND = Command("print the leaderboard of one or more runs",
                  configure, run, __doc__)
