"""``cbench schema``: the JSON schema of params.yaml (or with ``--profile`` of a profile), for
editors, or with ``--results`` of a release's results.json; printed, or written with ``-o``."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.common import Command, Parser, UsageError


def configure(parser: Parser) -> None:
    parser.add_argument("--profile", action="store_true",
                        help="the schema of a profile (no key is required)")
    parser.add_argument("--results", action="store_true",
                        help="the schema of a release's results.json (cbench release)")
    parser.add_argument("--params", metavar="YAML",
                        help="load the plugins this params file names first")
    parser.add_argument("--output", "-o", help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    import json

    from pipeline.config import ConfigError, json_schema, read_yaml
    from pipeline.plugins import load_plugins

    if args.params:  # the plugins a params file names register their losses first
        try:
            load_plugins(read_yaml(args.params).get("plugins") or [])
        except (ConfigError, ValueError) as err:
            raise UsageError(f"--params {args.params}: {err}") from None
    if args.results and args.profile:
        raise UsageError("--results and --profile: choose one schema")
    if args.results:
        from pipeline.release.results import schema

        document = schema()
    else:
        document = json_schema(partial=args.profile)
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text, end="")
    return 0


COMMAND = Command("JSON schema of params.yaml for editors",
                  configure, run, __doc__)
