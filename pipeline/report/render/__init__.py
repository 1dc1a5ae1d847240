"""The shared rendering: Markdown, LaTeX and HTML writers, the figures' canvas and drawers, and
:mod:`.publish`, which writes one run's report files. Computes no statistic.
"""
