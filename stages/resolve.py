"""Validate params.yaml (with a profile laid over it) and write the resolved params.

The profile comes from ``--profile`` or the ``CBENCH_PROFILE`` environment variable. Writes
``params.resolved.yaml`` (every option filled in; every later stage reads it) and
``params.tracked.yaml``, what DVC tracks: the grid axes, a few headline settings, and one digest
per section, so each stage reruns exactly when a section it reads changes and ``dvc exp show``
lists the grid and the metrics rather than every option.
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from pipeline.config import ConfigError, expand, load
from pipeline.config.tracked import tracked
from pipeline.runtime.context import RESOLVED, TRACKED
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
        given = args.params + (f" + {args.profile}" if args.profile else "")
        print(f"invalid params ({given}):\n{err}", file=sys.stderr)
        return 2
    resolved = params.model_dump(mode="json")
    header = f"# generated from {args.params}" + (f" + {args.profile}" if args.profile else "")
    for path, content in ((RESOLVED, resolved), (TRACKED, tracked(resolved))):
        text = yaml.safe_dump(content, sort_keys=False)
        atomic_write_bytes(path, f"{header}; do not edit\n{text}".encode())
    profile = f" (profile {args.profile})" if args.profile else ""
    print(f"params ok: {len(cells)} cells{profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
