"""The papers' claims and studies: Betser et al.'s Table 1 beside the run's cells, the image
rows, the O(1/k) law, the epoch gap, the trained-enough criterion and the simplex, with their
Markdown and plots.
"""
