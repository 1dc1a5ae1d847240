"""``cbench release NAME``: the workspace's results as ``releases/NAME/`` and
``releases/NAME.tar.gz`` (leaderboards, cells.csv, ranks and pairs, figures, results.json,
MANIFEST.json with every file's SHA-256, REPRODUCE.md), logged as one MLflow run; never over an
existing NAME. ``cbench release --check NAME`` recomputes the digests and validates
results.json: exit 1 when a file was changed, removed or added."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.common import Command, Parser, UsageError


def configure(parser: Parser) -> None:
    parser.add_argument("name", metavar="NAME", help="the release's name, e.g. v1.0")
    parser.add_argument("--check", action="store_true",
                        help="check the existing release NAME instead of writing one")
    parser.add_argument("--releases", type=Path, default=Path("releases"),
                        help="the folder of releases (default: releases/)")
    parser.add_argument("--no-mlflow", action="store_true",
                        help="do not log the release as an MLflow run")


def _check(folder: Path) -> int:
    from pipeline.release.bundle import ReleaseError, check_release

    try:
        problems = check_release(folder)
    except ReleaseError as err:
        raise UsageError(str(err)) from None
    for line in problems:
        print(f"{folder}: {line}")
    print(f"{folder}: {'intact' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


def _log(name: str, commit: str, folder: Path, counts: dict[str, int]) -> None:
    """The release as one MLflow run, in the workspace's tracking store (params.resolved.yaml's
    tracking.uri, or $MLFLOW_TRACKING_URI); said, not fatal, when the params do not resolve."""
    from pipeline.config import ConfigError
    from pipeline.runtime import context
    from pipeline.runtime.tracking.runs import Tracker

    try:
        params = context.resolved_params()
    except ConfigError as err:
        print(f"not logged to MLflow: {err}")
        return
    tracker = Tracker(context.tracking_uri(params), params.tracking.experiment)
    run_id = tracker.log_release(name, commit, folder.parent / f"{name}.tar.gz", counts)
    print(f"logged as MLflow run {run_id} ({tracker.uri})")


def run(args: argparse.Namespace) -> int:
    from pipeline.release.bundle import ReleaseError, check_name, read_release, write_release

    try:
        check_name(args.name)
    except ReleaseError as err:
        raise UsageError(str(err)) from None
    if args.check:
        return _check(args.releases / args.name)
    from pipeline.runtime import context

    commit = context.git_sha()
    try:
        folder = write_release(args.name, Path("."), args.releases, commit)
    except ReleaseError as err:
        raise UsageError(str(err)) from None
    release = read_release(folder)
    print(f"release {args.name}: {folder}/ and {folder}.tar.gz, {len(release.cells)} cells, "
          f"{len(release.manifest['files'])} files, commit {commit}")
    if not args.no_mlflow:
        _log(args.name, commit, folder, release.manifest["cells"])
    return 0


COMMAND = Command("a versioned, citable bundle of the workspace's results (or --check one)",
                  configure, run, __doc__)
