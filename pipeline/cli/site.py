"""``cbench site RELEASES... -o SITE``: static HTML of one or more releases (each a release
folder, or a folder of them): an index (opening with ``--findings``, a Markdown document, and
the releases' paper claims and verdicts), a page per release with its task's leaderboard, the
aggregate ranks and critical-difference diagram, a page per loss, and the diff between
consecutive releases. No server, no network: open SITE/index.html from disk or any static
host."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.common import Command, Parser, UsageError


def configure(parser: Parser) -> None:
    parser.add_argument("releases", type=Path, nargs="+", metavar="RELEASES",
                        help="release folders, or folders of releases (e.g. releases/)")
    parser.add_argument("--output", "-o", type=Path, default=Path("site"),
                        help="the site's folder (default: site/)")
    parser.add_argument("--findings", type=Path, default=None, metavar="MARKDOWN",
                        help="a findings document the front page shows before the releases "
                             "(e.g. docs/FINDINGS.md; its local images are embedded)")


def run(args: argparse.Namespace) -> int:
    from pipeline.release.bundle import ReleaseError
    from pipeline.release.site import build_site, release_folders

    try:
        index = build_site(release_folders(args.releases), args.output, args.findings)
    except ReleaseError as err:
        raise UsageError(str(err)) from None
    print(f"site: {index.resolve().as_uri()}")
    return 0


COMMAND = Command("static HTML of releases, for file:// or any static host",
                  configure, run, __doc__)
