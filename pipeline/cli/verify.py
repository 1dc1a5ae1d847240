"""``cbench verify``: retrain a sample of the workspace's done cells and check that they
reproduce their stored selves (exit code 1 when one does not)."""

from __future__ import annotations

import argparse
import importlib

from pipeline.cli.common import Command, Parser, UsageError


def configure(parser: Parser) -> None:
    parser.add_argument("--sample", type=int, metavar="N",
                        help="how many done trainings to retrain, drawn at random (default 4)")
    parser.add_argument("--cells", nargs="+", metavar="ID", help="these cells instead")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--no-report", action="store_true",
                        help="do not rewrite the report with the checks")


def run(args: argparse.Namespace) -> int:
    from pipeline.runtime import context
    from pipeline.runtime.cells.verify import sample, to_markdown, verify_grid
    from pipeline.runtime.store import files
    from pipeline.runtime.store.folders import read_verify_checks, store_root

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
    dataset = files.read_dataset(context.dataset_path(params.data.name))
    store = store_root(params.compute.storage)
    results = verify_grid(params, rows, store, dataset, chosen, params.train.threads)
    print(to_markdown(results), end="")
    checks = read_verify_checks(store, rows)
    print(f"checks recorded in {store}/verify/ ({len(checks)} of the grid's {len(rows)} cells "
          "have one); the report stage marks them in the leaderboard")
    if not args.no_report and context.STATS.exists():
        importlib.import_module("stages.report").main([])
    return 0 if all(r.reproduced for r in results) else 1


COMMAND = Command("retrain done cells and check that they reproduce",
                  configure, run, __doc__)
