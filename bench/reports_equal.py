"""Do two runs' reports hold the same numbers? Every CSV under two ``reports/`` folders, file by
file: the same columns, text columns equal, numeric columns equal to ``--rtol`` (1e-9 relative),
row by row in the files' order.

    python bench/reports_equal.py OLD_REPORTS NEW_REPORTS [--rtol 1e-9]

Columns that measure the machine or name the run are left out, by name (:data:`VOLATILE`): wall
times and throughput, memory, energy, paths, timestamps, run ids, and the commit the run was
made at (``git_sha``; also ``embeddings_sha256``, the hash of a Parquet file whose metadata holds
the commit, while its columns are the same). Prints one line per file (``equal``, or the
differing columns with the first differing row) and exits 1 when any file differs, is missing
from one side, or has other columns or rows.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# what differs between two runs of the same code on the same data: the machine's time, memory
# and energy, where the files were, when and under which run id and commit they were made
VOLATILE = re.compile(
    r"(seconds|_s$|^wall|time|samples_per_second|throughput"  # wall times, speed
    r"|bytes|rss|memory"  # memory
    r"|energy|joules"  # energy
    r"|path|^uri$|artifact"  # paths
    r"|timestamp|date|created|started|finished"  # timestamps
    r"|run_id|^run$|mlflow"  # run ids
    r"|git_sha|embeddings_sha256)")  # the commit: the embeddings' Parquet metadata holds it too


def _numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _differs(old: pd.Series, new: pd.Series, rtol: float) -> int | None:
    """The first row where the columns differ, or None."""
    if _numeric(old) and _numeric(new):
        a, b = old.to_numpy(float), new.to_numpy(float)
        with np.errstate(invalid="ignore"):  # inf - inf
            close = np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b))
        same = (a == b) | (np.isnan(a) & np.isnan(b)) | close
    else:
        text_a, text_b = (c.fillna("<NA>").astype(str).to_numpy() for c in (old, new))
        same = text_a == text_b
    bad = np.flatnonzero(~same)
    return int(bad[0]) if bad.size else None


def compare(old: Path, new: Path, rtol: float = 1e-9) -> str:
    """``equal``, or what differs between the CSV files ``old`` and ``new``."""
    a, b = pd.read_csv(old), pd.read_csv(new)
    if list(a.columns) != list(b.columns):
        return (f"columns differ: only old {sorted(set(a.columns) - set(b.columns))}, "
                f"only new {sorted(set(b.columns) - set(a.columns))}"
                + ("" if set(a.columns) != set(b.columns) else ", order differs"))
    if len(a) != len(b):
        return f"rows differ: {len(a)} old, {len(b)} new"
    out = []
    for col in a.columns:
        if VOLATILE.search(col):
            continue
        row = _differs(a[col], b[col], rtol)
        if row is not None:
            out.append(f"{col} (row {row}: {a[col].iloc[row]!r} -> {b[col].iloc[row]!r})")
    return "equal" if not out else "differs: " + "; ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rtol", type=float, default=1e-9)
    args = parser.parse_args(argv)
    names = sorted({p.relative_to(args.old) for p in args.old.rglob("*.csv")}
                   | {p.relative_to(args.new) for p in args.new.rglob("*.csv")})
    failed = False
    for name in names:
        old, new = args.old / name, args.new / name
        if not (old.is_file() and new.is_file()):
            result = f"only in {'old' if old.is_file() else 'new'}"
        else:
            result = compare(old, new, args.rtol)
        failed |= result != "equal"
        print(f"{name}: {result}")
    skipped = sorted({c for n in names if (args.old / n).is_file()
                      for c in pd.read_csv(args.old / n, nrows=0).columns if VOLATILE.search(c)})
    print(f"left out (volatile): {', '.join(skipped) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
