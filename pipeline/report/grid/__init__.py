"""One run's leaderboard and comparison as values: the per-cell table, the board, the ranks,
the paired comparisons, the best settings and the figure plan (:func:`build.build`).
"""
