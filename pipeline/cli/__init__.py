"""The ``cbench`` command line (``cbench = "pipeline.cli:main"``; ``python -m pipeline.cli``).

- :mod:`.app`: :func:`main`, the parser of every subcommand, the one place a failure is printed.
- :mod:`.common`: :class:`~.common.UsageError` (the one way to fail), the parser class that turns
  argparse's errors into it, a subcommand's :class:`~.common.Command`, the shared options.
- one module per subcommand, each with its ``COMMAND``: :mod:`.stage`, :mod:`.leaderboard`,
  :mod:`.compare`, :mod:`.verify`, :mod:`.schema`.

Imports point one way: this package's ``__init__`` and ``__main__`` import :mod:`.app`, which
imports the subcommands, which import :mod:`.common` only (``tests/test_cli_package.py``).
"""

from pipeline.cli.app import main

__all__ = ["main"]
