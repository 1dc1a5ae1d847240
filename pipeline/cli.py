"""``cbench``: run one stage, print (and merge) leaderboards, or compare two variants.

``cbench leaderboard [CSV ...]`` reads one or more per-cell tables (``reports/cells.csv`` of
runs on other machines, clusters or commits; default the local one), merges them keeping each
row's provenance (refusing different code fingerprints of one cell unless ``--allow-mixed``), and
prints the leaderboard in Markdown, as the report stage writes it; ``--cells`` prints the cells.
The table's settings (``report.columns``, ``report.primary``, …) come from ``--params``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

STAGES = ("resolve", "prepare", "train", "stats", "search", "bounds", "probe", "geometry", "report")


class UsageError(Exception):
    """A bad command line: printed without a traceback, exit code 2."""


def report_config(path: str | Path, **overrides: Any) -> Any:
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


def _read_tables(paths: list[str]) -> list[tuple[str, Any]]:
    import pandas as pd

    out = []
    for p in paths:
        if not Path(p).is_file():
            raise UsageError(f"{p}: no per-cell table; run `make run` first (it writes "
                             "reports/cells.csv)")
        out.append((p, pd.read_csv(p)))
    return out


def _filter(board: Any, exprs: list[str]) -> Any:
    for expr in exprs:
        key, _, value = expr.partition("=")
        if key not in board.columns or not value:
            raise UsageError(f"--filter {expr!r}: expected COLUMN=VALUE with COLUMN in "
                             f"{list(board.columns)}")
        board = board[board[key].astype(str) == value]
    if board.empty:
        raise UsageError(f"--filter {' '.join(exprs)}: no cell left")
    return board


def _leaderboard(args: argparse.Namespace) -> int:
    from pipeline.metrics import is_metric
    from pipeline.report.board import make_board
    from pipeline.report.leaderboard import MixedRunsError, merge_runs
    from pipeline.report.markdown import cells_table, to_markdown
    from pipeline.report.tables import axes_in, varying

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
                 *split_by, "status", *cfg.columns, *(["source"] if len(args.csv or []) > 1 else [])]
        print(cells_table(cells.head(args.top) if args.top else cells, shown), end="")
        return 0
    if args.sort:
        if not is_metric(args.sort):
            raise UsageError(f"--sort {args.sort!r}: the leaderboard ranks by a metric; use "
                             "--cells to sort cells by any column")
        cfg = cfg.model_copy(update={"primary": args.sort})
    print(to_markdown(make_board(cells, cfg, split_by=split_by)), end="")
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


def _verify(args: argparse.Namespace) -> int:
    """Retrain a sample of the workspace's done cells and compare them with the stored ones."""
    from pipeline.runtime import context, storage
    from pipeline.runtime.store import read_verify_checks, store_root
    from pipeline.runtime.verify import sample, to_markdown, verify_grid

    if args.sample is not None and args.sample < 1:
        raise UsageError(f"--sample {args.sample}: must be >= 1")
    if not context.GRID.exists():
        raise UsageError(f"{context.GRID}: no trained grid here; run `make run` first")
    params = context.resolved_params()
    rows = context.read_grid().to_dict("records")
    if args.cells:
        known = {str(r["cell_id"]): r for r in rows}
        unknown = [c for c in args.cells if c not in known]
        if unknown:
            raise UsageError(f"--cells {' '.join(unknown)}: not cells of this grid "
                             f"(data/grid.json); e.g. {', '.join(list(known)[:3])}")
        bad = [c for c in args.cells if known[c]["status"] != "ok"]
        if bad:
            raise UsageError(f"--cells {' '.join(bad)}: not trained (status failed)")
        chosen = [known[c] for c in args.cells]
    else:
        chosen = sample(rows, args.sample or 4, args.seed)
    dataset = storage.read_dataset(context.dataset_path(params.data.name))
    store = store_root(params.compute.storage)
    results = verify_grid(params, rows, store, dataset, chosen, params.train.threads)
    print(to_markdown(results), end="")
    checks = read_verify_checks(store, rows)
    print(f"checks recorded in {store}/verify/ ({len(checks)} of the grid's {len(rows)} cells "
          "have one); the report stage marks them in the leaderboard")
    if not args.no_report and context.STATS.exists():
        importlib.import_module("stages.report").main([])
    return 0 if all(r.reproduced for r in results) else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    stage = sub.add_parser("stage", help="run one pipeline stage (as dvc repro would)")
    stage.add_argument("name", choices=STAGES)
    stage.add_argument("rest", nargs=argparse.REMAINDER)
    board = sub.add_parser("leaderboard", help="print the leaderboard of one or more runs")
    board.add_argument("csv", nargs="*", metavar="CSV",
                       help="per-cell tables to merge (default: reports/cells.csv)")
    board.add_argument("--params", default="params.yaml",
                       help="params file whose report: section shapes the table")
    board.add_argument("--cells", action="store_true", help="one row per cell, not per setting")
    board.add_argument("--filter", action="append", default=[], metavar="COLUMN=VALUE")
    board.add_argument("--sort", metavar="COLUMN", help="rank by this metric (with --cells: "
                       "sort by any column)")
    board.add_argument("--desc", action="store_true", help="with --cells --sort: descending")
    board.add_argument("--top", type=int, help="rows shown (default: report.top)")
    board.add_argument("--allow-mixed", action="store_true",
                       help="keep cells trained by different code as separate rows")
    board.add_argument("--out", metavar="CSV", help="also write the merged per-cell table here")
    sub.add_parser("compare", help="two variants side by side (see `cbench compare --help`)",
                   add_help=False)
    verify = sub.add_parser("verify", help="retrain done cells and check that they reproduce")
    verify.add_argument("--sample", type=int, metavar="N",
                        help="how many done trainings to retrain, drawn at random (default 4)")
    verify.add_argument("--cells", nargs="+", metavar="ID", help="these cells instead")
    verify.add_argument("--seed", type=int, default=0, help="seed of the sample")
    verify.add_argument("--no-report", action="store_true",
                        help="do not rewrite the report with the checks")
    schema = sub.add_parser("schema", help="JSON schema of params.yaml for editors")
    schema.add_argument("--profile", action="store_true",
                        help="the schema of a profile (no key is required)")
    schema.add_argument("--params", help="load the plugins this params file names first")
    schema.add_argument("--output", "-o", help="write to this file instead of stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:
        from pipeline.cli_compare import compare_main

        return compare_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "stage":
        return int(importlib.import_module(f"stages.{args.name}").main(args.rest))
    if args.command == "schema":
        return _schema(args)
    try:
        return _verify(args) if args.command == "verify" else _leaderboard(args)
    except UsageError as exc:
        print(f"cbench {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
