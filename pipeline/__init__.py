"""contrastive-bench: a reproducible, distributed benchmark for contrastive losses."""

__version__ = "0.1.0"
