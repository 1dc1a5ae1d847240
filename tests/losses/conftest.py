"""Makes the repository root importable (``pipeline``, ``tests.oracles``) when pytest is run
without an installed package; harmless when the root is already on ``sys.path``."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
