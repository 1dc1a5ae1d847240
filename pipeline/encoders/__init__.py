"""Encoders: inputs ``(B, *input_shape)`` → raw embeddings ``(B, d)`` (not normalised).

Vector encoders (linear, mlp), ResNet-18, and pretrained CLIP / DINO towers read from local
weight files; a supervised classifier head; device and autocast helpers.
"""

from pipeline.encoders.device import autocast_context, pick_device
from pipeline.encoders.registry import ENCODERS, EncoderSpec, make_encoder, resolve_encoder_options
from pipeline.encoders.simple import count_parameters
from pipeline.encoders.supervised import classifier_head, supervised_loss

__all__ = [
    "ENCODERS",
    "EncoderSpec",
    "autocast_context",
    "classifier_head",
    "count_parameters",
    "make_encoder",
    "pick_device",
    "resolve_encoder_options",
    "supervised_loss",
]
