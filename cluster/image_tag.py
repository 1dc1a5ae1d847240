"""The project image's tag, which names the code inside it; manifests rendered with it.

    python cluster/image_tag.py                        # the tag of this checkout's code
    python cluster/image_tag.py --render FILE          # FILE with IMAGE_TAG replaced by the tag
    python cluster/image_tag.py --check FILE...        # refuse files whose image tag is another
    python cluster/image_tag.py --expect TAG           # refuse when this code is not TAG's

The tag is ``<project version>-ray<Ray version>-<code digest>``: the digest is 12 hex digits of
SHA-256 over every file of :data:`CODE` (path and bytes), so a change of code, pipeline
definition, defaults or profiles gives a new tag even without a version bump, and a node that
keeps an image (``imagePullPolicy: IfNotPresent``) can only keep one with the same code. The
committed manifests name the tag ``IMAGE_TAG``; ``--render`` fills it in from the checkout they
are applied from, ``--check`` refuses a rendered file whose tag is another checkout's, and the
image's build and its entrypoint run ``--expect`` on the code they hold. Stdlib only: it runs
before any environment is installed (the Dockerfile, a laptop with only kubectl).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"\bIMAGE_TAG\b")  # a word: CBENCH_IMAGE_TAG is not it
# What decides what a run computes: the code, the pipeline definition, the defaults, the profiles
# and the cluster's own entrypoint and profile. Not tests, docs, manifests or the README.
CODE = ("pipeline", "stages", "profiles", "dvc.yaml", "params.yaml", "params.schema.json",
        "pyproject.toml", ".dvcignore", "cluster/entrypoint.sh", "cluster/params.cluster.yaml",
        "cluster/image_tag.py")
IMAGE = re.compile(r"image:\s*\S+/contrastive-bench:(\S+)")


def _files(root: Path) -> list[Path]:
    out = []
    for name in CODE:
        path = root / name
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else \
            [path] if path.exists() else []
        out += [p for p in found if "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return out


def code_digest(root: Path = ROOT) -> str:
    """12 hex digits of SHA-256 over the path and bytes of every file of :data:`CODE`."""
    h = hashlib.sha256()
    for path in _files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:12]


def image_tag(root: Path = ROOT) -> str:
    """``<version>-ray<Ray version>-<code digest>``, from pyproject.toml and the files."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    ray = [d for d in project["dependencies"] if re.match(r"ray(\[[^]]*\])?==", d)]
    if len(ray) != 1:
        raise SystemExit("pyproject.toml: expected one pinned ray[default]==<version>, "
                         f"found {ray}")
    return f"{project['version']}-ray{ray[0].split('==')[1]}-{code_digest(root)}"


def check(path: Path, tag: str) -> list[str]:
    """What is wrong with the image tags of a rendered manifest (none: [])."""
    found = IMAGE.findall(path.read_text())
    if not found:
        return [f"{path}: names no contrastive-bench image"]
    return [f"{path}: image tag {t!r} is not this checkout's {tag!r} (render it with "
            f"`python cluster/image_tag.py --render {path.name}` and build that image)"
            for t in found if t != tag]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--render", type=Path, metavar="FILE")
    group.add_argument("--check", type=Path, nargs="+", metavar="FILE")
    group.add_argument("--expect", metavar="TAG")
    args = parser.parse_args(argv)
    tag = image_tag()
    if args.render:
        text = args.render.read_text()
        if not PLACEHOLDER.search(text):
            print(f"{args.render}: no IMAGE_TAG to fill in", file=sys.stderr)
            return 2
        sys.stdout.write(PLACEHOLDER.sub(tag, text))
    elif args.check:
        problems = [p for path in args.check for p in check(path, tag)]
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    elif args.expect is not None:
        if args.expect != tag:
            print(f"image tag {args.expect!r} does not name this code ({tag!r}): the image was "
                  "built from another checkout under this tag; rebuild it with "
                  "`docker build --build-arg IMAGE_TAG=$(python cluster/image_tag.py) ...`",
                  file=sys.stderr)
            return 1
    else:
        print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
