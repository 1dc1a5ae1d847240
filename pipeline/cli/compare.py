"""``cbench compare A B``: two variants side by side, matched setting by setting and seed by seed.

Reads the per-cell table (``reports/cells.csv`` by default: matching needs the seeds). For every
setting (the other grid axes) where both variants have ok cells, and every metric (default
``report.columns`` of ``--params``), it prints A and B as mean ± half-width over seeds, the paired
difference B − A with its interval, and the paired t-test p-value; then the same pooled over all
matched settings, as Markdown tables. Values read as the metric registry formats them. Exit
codes: 0 printed, 2 usage error (unknown variant, axis, metric or file).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.cli.common import Command, Parser, UsageError, add_params, report_config
from pipeline.metrics import is_metric, lookup

if TYPE_CHECKING:
    import pandas as pd


def configure(parser: Parser) -> None:
    parser.add_argument("a", metavar="A", help="first variant (the reference of the difference)")
    parser.add_argument("b", metavar="B", help="second variant; differences are B − A")
    parser.add_argument("--csv", type=Path, default=Path("reports/cells.csv"),
                        help="per-cell table (default: reports/cells.csv)")
    add_params(parser, "report.columns and report.level are the defaults")
    parser.add_argument("--axis", default="loss",
                        help="the column A and B are values of (default: loss)")
    parser.add_argument("--metrics", nargs="+", help="metrics to compare (default: "
                        "report.columns present in the table)")
    parser.add_argument("--level", type=float, help="interval level (default: report.level)")


def _fmt(metric: str, mean: float, lo: float = float("nan"), hi: float = float("nan")) -> str:
    from pipeline.report.formatting import fmt_interval

    return fmt_interval(mean, lo, hi, lookup(metric) if is_metric(metric) else None)


def _name(metric: str) -> str:
    return lookup(metric).header if is_metric(metric) else metric


def _side_by_side(board: pd.DataFrame, a: str, b: str, axis: str, metrics: list[str],
                  level: float, alpha: float) -> tuple[list[str], list[list[str]]]:
    import pandas as pd

    from pipeline.report.formatting import fmt_value
    from pipeline.report.grid.compare import compare_to_baseline, default_pair_on
    from pipeline.report.grid.tables import aggregate

    pair_on = default_pair_on(board, axis)
    sub = board[board[axis].isin([a, b])]
    agg = aggregate(sub, [axis, *pair_on], metrics, level)
    cmp = compare_to_baseline(sub, a, axis, pair_on, metrics, level, alpha)
    varying = [c for c in pair_on if sub[c].nunique(dropna=False) > 1]  # the rest is constant
    rows = []
    for r in cmp.itertuples(index=False):
        setting = {c: getattr(r, c) for c in pair_on}
        mask = pd.Series(True, index=agg.index)
        for c, v in setting.items():
            mask &= (agg[c] == v) | (agg[c].isna() & pd.isna(v))
        side = {val: agg[mask & (agg[axis] == val)].iloc[0] for val in (a, b)}
        m = r.metric
        rows.append([" ".join(f"{c}={fmt_value(setting[c])}" for c in varying) or "all",
                     _name(m), str(r.n_pairs),
                     *(_fmt(m, side[v][f"{m}_mean"], side[v][f"{m}_lo"], side[v][f"{m}_hi"])
                       for v in (a, b)),
                     _fmt(m, r.diff_mean, r.diff_lo, r.diff_hi),
                     fmt_value(r.p_value) + (" *" if r.significant else "")])
    return ["setting", "metric", "n", a, b, f"{b} − {a}", "p"], rows


def _pooled(board: pd.DataFrame, a: str, b: str, axis: str, metrics: list[str],
            level: float, alpha: float) -> tuple[list[str], list[list[str]]]:
    from pipeline.report.formatting import fmt_value
    from pipeline.report.grid.compare import compare_to_baseline

    sub = board[board[axis].isin([a, b])]
    cmp = compare_to_baseline(sub, a, axis, None, metrics, level, alpha, by_setting=False)
    rows = [[_name(r.metric), str(r.n_pairs), _fmt(r.metric, r.baseline_mean),
             _fmt(r.metric, r.variant_mean), _fmt(r.metric, r.diff_mean, r.diff_lo, r.diff_hi),
             fmt_value(r.p_value) + (" *" if r.significant else ""), fmt_value(r.wilcoxon_p)]
            for r in cmp.itertuples(index=False)]
    return ["metric", "pairs", a, b, f"{b} − {a}", "p", "wilcoxon p"], rows


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from pipeline.report.formatting import fmt_value, pct
    from pipeline.report.grid.compare import default_pair_on
    from pipeline.report.grid.tables import axes_in, metrics_in
    from pipeline.report.render.markdown import table

    cfg = report_config(args.params, level=args.level)
    if not args.csv.is_file():
        raise UsageError(f"--csv {args.csv}: no such file; run the pipeline (make run) first")
    board = pd.read_csv(args.csv)
    if "seed" not in board:
        raise UsageError(f"--csv {args.csv}: no 'seed' column; compare reads the per-cell table "
                         "(reports/cells.csv), whose cells pair seed by seed")
    if args.axis not in board:
        raise UsageError(f"--axis {args.axis!r}: not a column of the table; allowed: "
                         f"{', '.join(c for c in axes_in(board) if c != 'seed')}")
    values = sorted(map(str, board[args.axis].dropna().unique()))
    for name in (args.a, args.b):
        if name not in values:
            raise UsageError(f"unknown {args.axis} {name!r}; allowed: {', '.join(values)}")
    if args.a == args.b:
        raise UsageError(f"A and B are both {args.a!r}; name two different {args.axis} values")
    board[args.axis] = board[args.axis].astype(str)
    have = metrics_in(board)
    metrics = args.metrics or [m for m in cfg.columns if m in have] or have
    try:
        side = _side_by_side(board, args.a, args.b, args.axis, metrics, cfg.level, cfg.alpha)
        pooled = _pooled(board, args.a, args.b, args.axis, metrics, cfg.level, cfg.alpha)
    except ValueError as exc:  # the comparison's own checks (an unknown metric column, ...)
        raise UsageError(str(exc)) from None
    sub = board[board[args.axis].isin([args.a, args.b])]
    fixed = [f"{c}={fmt_value(sub[c].iloc[0])}" for c in default_pair_on(board, args.axis)
             if sub[c].nunique(dropna=False) == 1]
    print(f"{args.a} vs {args.b} ({args.axis}), from {args.csv}; mean ± half-width of the "
          f"{pct(cfg.level)} t-interval over seeds; p: paired t-test (* p < {cfg.alpha:g})")
    print(f"fixed: {' '.join(fixed) or '(nothing)'}\n")
    if not side[1]:
        print(f"no setting has ok cells of both {args.a} and {args.b}")
        return 0
    print(table(*side, ["l", "l", "r", "r", "r", "r", "r"]))
    print("pooled over all matched settings and seeds:\n")
    print(table(*pooled, ["l", "r", "r", "r", "r", "r", "r"]), end="")
    return 0


COMMAND = Command("two variants side by side, matched setting by setting and seed by seed",
                  configure, run, __doc__)
