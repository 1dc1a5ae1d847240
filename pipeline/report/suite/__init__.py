"""The leaderboard across a suite's tasks: its values (:mod:`.board`, :mod:`.tables`,
:mod:`.points`, :mod:`.notes`, :mod:`.values`), its text (:mod:`.render`) and its files
(:mod:`.publish`).
"""
