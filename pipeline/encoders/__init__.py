"""Encoders: input ``(B, D)`` → raw embedding ``(B, d)`` (not normalised)."""

from pipeline.encoders.simple import build_encoder, count_parameters

__all__ = ["build_encoder", "count_parameters"]
