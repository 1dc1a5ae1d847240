"""``python -m pipeline.cli ...``: the same as ``cbench ...``."""

import sys

from pipeline.cli.app import main

sys.exit(main())
