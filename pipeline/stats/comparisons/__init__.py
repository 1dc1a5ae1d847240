"""Comparing methods over blocks and seeds (SPEC §6-7): the statistics of the leaderboard's and
the suite board's comparisons, each a function of a (blocks × methods × seeds) score array.

- :mod:`.ranking`: ranks per block, the Friedman and Iman-Davenport tests, Nemenyi and Holm
  decisions, critical differences;
- :mod:`.aggregates`: the registry of per-method aggregates (mean, IQM, win rate, Borda, rank
  interval, optimality gap) and the one bootstrap they share;
- :mod:`.rank_uncertainty`: the bootstrap distribution of each method's mean rank;
- :mod:`.power`: how many seeds or blocks would separate a pair, and practical equivalence;
- :mod:`.profiles`: performance profiles and the optimality gap (Agarwal et al. 2021);
- :mod:`.inference`: paired tests and intervals of a difference;
- :mod:`.compare`: P(A > B) and the tables of pairwise comparisons.
"""
