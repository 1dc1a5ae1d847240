"""Similarity search on held-out embeddings (SPEC.md §3). Pure numpy."""

from pipeline.search.retrieval import heldout_infonce_risk, recall_at_k

__all__ = ["heldout_infonce_risk", "recall_at_k"]
