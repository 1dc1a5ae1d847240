"""Contrastive losses as plain functions of tensors (SPEC.md §1).

Each loss's module adds its entry to :data:`LOSSES` (``LOSSES["name"] = LossSpec(...)``);
importing this package imports every one of them, so the table is complete wherever any part
of the package is imported."""

from pipeline.losses.dcl import dcl, dcl_in_batch
from pipeline.losses.infonce import (
    infonce,
    infonce_per_anchor,
    nt_xent,
)
from pipeline.losses.negatives import enqueue, in_batch_negatives
from pipeline.losses.registry import LOSSES, LossBatch, LossSpec, resolve_options
from pipeline.losses.schedules import (
    SCHEDULES,
    LearnableTemperature,
    resolve_schedule_options,
    temperature_at,
)
from pipeline.losses.soft_supcon import soft_supcon
from pipeline.losses.supcon import supcon
from pipeline.losses.synco import synco_loss, synthetic_negatives
from pipeline.losses.weighted import weighted_infonce
from pipeline.losses.weince import weince
from pipeline.losses.xclr import xclr, xclr_graph, xclr_two_views
from pipeline.losses.y_aware import y_aware, y_aware_two_views

__all__ = [
    "LOSSES",
    "SCHEDULES",
    "LearnableTemperature",
    "LossBatch",
    "LossSpec",
    "dcl",
    "dcl_in_batch",
    "enqueue",
    "in_batch_negatives",
    "infonce",
    "infonce_per_anchor",
    "nt_xent",
    "resolve_options",
    "resolve_schedule_options",
    "soft_supcon",
    "supcon",
    "synco_loss",
    "synthetic_negatives",
    "temperature_at",
    "weighted_infonce",
    "weince",
    "xclr",
    "xclr_graph",
    "xclr_two_views",
    "y_aware",
    "y_aware_two_views",
]
