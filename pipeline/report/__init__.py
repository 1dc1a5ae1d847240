"""Leaderboard tables and plots built from the stage tables (pandas and matplotlib only), one
folder per concept: ``grid/`` (one run's leaderboard), ``suite/`` (the board across a suite's
tasks), ``papers/`` (the papers' claims and studies), ``render/`` (the shared writers, drawers and
``publish``); ``formatting`` (numbers → text) serves them all."""
