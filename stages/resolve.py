"""Validate params.yaml (with a profile laid over it) and write params.resolved.yaml.

The profile comes from ``--profile`` or the ``CBENCH_PROFILE`` environment variable. Every later
stage reads the resolved file, so DVC sees exactly the values that ran, key by key.
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from pipeline.config import ConfigError, expand, load
from pipeline.runtime.context import RESOLVED
from pipeline.runtime.storage import atomic_write_bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=os.environ.get("CBENCH_PROFILE") or None)
    args = parser.parse_args(argv)
    try:
        params = load(args.params, args.profile)
        cells = expand(params)
    except ConfigError as err:
        print(f"invalid params ({args.params}{' + ' + args.profile if args.profile else ''}):\n{err}",
              file=sys.stderr)
        return 2
    text = yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False)
    header = f"# generated from {args.params}" + (f" + {args.profile}" if args.profile else "")
    atomic_write_bytes(RESOLVED, f"{header}; do not edit\n{text}".encode())
    print(f"params ok: {len(cells)} cells{' (profile ' + args.profile + ')' if args.profile else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
