"""The shared rendering: Markdown, LaTeX and HTML writers, :mod:`.page` (the one HTML page shell
every page is written in), the figures' canvas and drawers, and :mod:`.publish`, which writes one
run's report files. Computes no statistic.
"""
