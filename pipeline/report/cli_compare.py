"""``cbench compare A B``: two variants side by side, matched setting by setting and seed by seed.

For every setting (the other grid axes) where both variants have ok cells, and every metric, it
prints A and B as mean ± half-width over seeds, the paired difference B − A with its interval, and
the paired t-test p-value; then the same pooled over all matched settings. Exit codes: 0 printed,
2 usage error (unknown variant, axis, metric or file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pipeline.report.compare import compare_to_baseline, default_pair_on
from pipeline.report.render import fmt_interval, fmt_value
from pipeline.report.tables import DEFAULT_METRICS, GRID_AXES, aggregate, present


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cbench compare", description=__doc__.splitlines()[0])
    p.add_argument("a", metavar="A", help="first variant (the reference of the difference)")
    p.add_argument("b", metavar="B", help="second variant; differences are B − A")
    p.add_argument("--csv", type=Path, default=Path("reports/leaderboard.csv"),
                   help="per-cell leaderboard (default: reports/leaderboard.csv)")
    p.add_argument("--axis", default="loss", help="the column A and B are values of (default: loss)")
    p.add_argument("--metrics", nargs="+", help="metrics to compare (default: the standard set "
                   "present in the leaderboard)")
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    return p


def _side_by_side(board: pd.DataFrame, a: str, b: str, axis: str, metrics: list[str],
                  level: float) -> pd.DataFrame:
    pair_on = default_pair_on(board, axis)
    sub = board[board[axis].isin([a, b])]
    agg = aggregate(sub, [axis, *pair_on], metrics, level)
    cmp = compare_to_baseline(sub, a, axis, pair_on, metrics, level)
    varying = [c for c in pair_on if sub[c].nunique(dropna=False) > 1]  # the rest is constant
    rows = []
    for r in cmp.itertuples(index=False):
        setting = {c: getattr(r, c) for c in pair_on}
        mask = pd.Series(True, index=agg.index)
        for c, v in setting.items():
            mask &= (agg[c] == v) | (agg[c].isna() & pd.isna(v))
        side = {val: agg[mask & (agg[axis] == val)].iloc[0] for val in (a, b)}
        m = r.metric
        rows.append({"setting": " ".join(f"{c}={fmt_value(setting[c])}" for c in varying) or "all",
                     "metric": m, "n": r.n_pairs,
                     a: fmt_interval(side[a][f"{m}_mean"], side[a][f"{m}_lo"], side[a][f"{m}_hi"]),
                     b: fmt_interval(side[b][f"{m}_mean"], side[b][f"{m}_lo"], side[b][f"{m}_hi"]),
                     f"{b} − {a}": fmt_interval(r.diff_mean, r.diff_lo, r.diff_hi),
                     "p": fmt_value(r.p_value) + (" *" if r.significant else "")})
    return pd.DataFrame(rows)


def _pooled(board: pd.DataFrame, a: str, b: str, axis: str, metrics: list[str],
            level: float) -> pd.DataFrame:
    sub = board[board[axis].isin([a, b])]
    cmp = compare_to_baseline(sub, a, axis, None, metrics, level, by_setting=False)
    return pd.DataFrame([{"metric": r.metric, "pairs": r.n_pairs,
                          a: fmt_value(r.baseline_mean), b: fmt_value(r.variant_mean),
                          f"{b} − {a}": fmt_interval(r.diff_mean, r.diff_lo, r.diff_hi),
                          "p": fmt_value(r.p_value) + (" *" if r.significant else ""),
                          "wilcoxon p": fmt_value(r.wilcoxon_p)}
                         for r in cmp.itertuples(index=False)])


def _fail(message: str) -> int:
    print(f"cbench compare: {message}", file=sys.stderr)
    return 2


def compare_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``cbench compare``; returns the exit code (0 ok, 2 usage error)."""
    try:
        args = _parser().parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # argparse already printed the usage message
        return int(exc.code or 0)
    if not args.csv.is_file():
        return _fail(f"--csv {args.csv}: no such file; run the pipeline (make run) first")
    board = pd.read_csv(args.csv)
    if args.axis not in board:
        return _fail(f"--axis {args.axis!r}: not a leaderboard column; allowed: "
                     f"{', '.join(c for c in present(GRID_AXES, board) if c != 'seed')}")
    values = sorted(map(str, board[args.axis].dropna().unique()))
    for name in (args.a, args.b):
        if name not in values:
            return _fail(f"unknown {args.axis} {name!r}; allowed: {', '.join(values)}")
    if args.a == args.b:
        return _fail(f"A and B are both {args.a!r}; name two different {args.axis} values")
    board[args.axis] = board[args.axis].astype(str)
    metrics = args.metrics or present(DEFAULT_METRICS, board)
    try:
        side, pooled = (_side_by_side(board, args.a, args.b, args.axis, metrics, args.level),
                        _pooled(board, args.a, args.b, args.axis, metrics, args.level))
    except ValueError as exc:
        return _fail(str(exc))
    sub = board[board[args.axis].isin([args.a, args.b])]
    fixed = [f"{c}={fmt_value(sub[c].iloc[0])}" for c in default_pair_on(board, args.axis)
             if sub[c].nunique(dropna=False) == 1]
    print(f"{args.a} vs {args.b} ({args.axis}), from {args.csv}; mean ± half-width of the "
          f"{args.level:.0%} t-interval over seeds; p: paired t-test (* p < 0.05)")
    print(f"fixed: {' '.join(fixed) or '(nothing)'}\n")
    if side.empty:
        print(f"no setting has ok cells of both {args.a} and {args.b}")
        return 0
    print(side.to_string(index=False))
    print("\npooled over all matched settings and seeds:\n")
    print(pooled.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(compare_main())
