"""Validate params.yaml (with a profile laid over it) and write the resolved params.

The profile comes from ``--profile`` or the ``CBENCH_PROFILE`` environment variable. Writes
``params.resolved.yaml`` (every option filled in; every later stage reads it) and
``params.tracked.yaml``, what DVC tracks: the grid axes and one digest per stage of the values
it reads (:mod:`pipeline.config.tracked`), so each stage reruns exactly when a value it reads
changes and ``dvc exp show`` lists the grid and the metrics rather than every option.

DVC runs this stage on every ``dvc repro`` (it reads the profile, which DVC does not track).
The files the params name (a data set's, a pretrained tower's weights, a plugin file) must be
readable (:mod:`pipeline.config.files`): a missing one is refused here, not at train time.
When the params, the profile, the code and the environment are those of the last successful
run, its two outputs are untouched and the files the params name are still readable, it says so
and stops before importing the validation (:mod:`pipeline.runtime.memo`): a rerun with nothing
to do costs an interpreter's start.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.readable import unreadable
from pipeline.runtime import memo
from pipeline.runtime.paths import RESOLVED, TRACKED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=os.environ.get("CBENCH_PROFILE") or None)
    args = parser.parse_args(argv)
    profile = f" (profile {args.profile})" if args.profile else ""
    inputs = [args.params, *([args.profile] if args.profile else [])]
    memo_key = memo.key("resolve", inputs, {"params": args.params, "profile": args.profile})
    info = memo.fresh("resolve", memo_key)
    if info is not None and not any(unreadable(Path(path), kind)  # as the full check reads them
                                    for path, kind in info.get("files", [])):
        print(f"params ok: {info['cells']} cells{profile}; unchanged since the last resolve")
        return 0
    memo.forget("resolve")
    # imported here: validation imports every registry (and with them torch)
    import yaml

    from pipeline.config import ConfigError, expand, load
    from pipeline.config.files import needed
    from pipeline.config.tracked import tracked
    from pipeline.runtime.store.files import atomic_write_bytes

    try:
        params = load(args.params, args.profile, check_files=True)
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
    if not resolved.get("plugins"):  # a plugin's code is outside what the memo's key covers
        named = [[str(n.path), n.kind] for _, _, files in needed(params) for n in files]
        memo.save("resolve", memo_key, files=[RESOLVED, TRACKED],
                  info={"cells": len(cells), "files": named})
    print(f"params ok: {len(cells)} cells{profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
