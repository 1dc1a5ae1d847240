"""Benchmark: the whole pipeline end to end, stages in the warm interpreter against cold ones.

    python bench/warm_cold.py [--profiles default profiles/grid-1000.yaml] [--repeats 1]
                              [--workdir DIR]

For each profile (``default``: params.yaml as it is, the ``make run`` grid) and repeat, the two
modes run back to back, in alternating order (warm first on even repeats, cold first on odd),
so that load from other processes hits both: warm (``CBENCH_WARM`` unset, the default: the
first stage starts the workspace's server, the others fork from it) and cold
(``CBENCH_WARM=off``: every stage a new interpreter). Each run is a fresh ``git clone`` of
the commit this checkout was at when the bench started (the same code in every run), its
``.venv`` this checkout's, an empty cell store and MLflow database, no server left from an
earlier run: ``dvc repro`` timed from start to end (wall seconds), every stage included.
Printed: seconds per run, medians per mode, and warm / cold. A run that fails stops the
bench with its log's tail.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def workspace(workdir: Path, name: str, commit: str) -> Path:
    """A fresh clone of this checkout at ``commit`` in ``workdir/name/repo``, ``../shared``
    linked."""
    base = workdir / name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    (base / "shared").symlink_to((ROOT.parent / "shared").resolve())
    subprocess.run(["git", "clone", "-q", str(ROOT), str(base / "repo")], check=True)
    subprocess.run(["git", "-C", str(base / "repo"), "checkout", "-q", commit], check=True)
    (base / "repo" / ".venv").symlink_to(ROOT / ".venv")
    return base / "repo"


def run(repo: Path, profile: str, warm: bool, log: Path) -> float:
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "CBENCH_STORE": str(repo.parent / "store")}
    env.pop("CBENCH_PROFILE", None)
    env.pop("CBENCH_WARM", None)
    if profile != "default":
        env["CBENCH_PROFILE"] = profile
    if not warm:
        env["CBENCH_WARM"] = "off"
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(["dvc", "repro"], cwd=repo, env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"dvc repro failed ({profile}, {'warm' if warm else 'cold'}): "
                 f"{log.read_text()[-3000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", nargs="+", default=["default", "profiles/grid-1000.yaml"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cbench-warm-cold-"))
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    print(f"code: {commit[:12]} (every run's clone)", flush=True)
    times: dict[tuple[str, bool], list[float]] = {}
    for profile in args.profiles:
        for r in range(args.repeats):
            for warm in ((True, False) if r % 2 == 0 else (False, True)):
                mode = "warm" if warm else "cold"
                name = f"{Path(profile).stem}-{mode}-{r}"
                repo = workspace(workdir, name, commit)
                s = run(repo, profile, warm, workdir / f"{name}.log")
                times.setdefault((profile, warm), []).append(s)
                print(f"{profile:28s} {mode} repeat {r}: {s:7.1f} s", flush=True)
    print("\nprofile                      warm s   cold s   warm/cold  (medians)")
    for profile in args.profiles:
        w = statistics.median(times[(profile, True)])
        c = statistics.median(times[(profile, False)])
        print(f"{profile:28s} {w:7.1f}  {c:7.1f}   {w / c:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
