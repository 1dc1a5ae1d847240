"""The params schema: load, validate, expand the grid into cells with stable ids.

``params.yaml`` is the single source of settings (STYLE.md §3). It is loaded once into a frozen,
typed schema; unknown keys, wrong types, bad options of a registered entry and rules across keys
fail *before any work* with the dotted key, the value and what is allowed. A profile
(``profiles/<name>.yaml``) holds only the keys it changes and is laid over ``params.yaml``.

- :mod:`.sections`: the sections as strict pydantic models (the grid's from ``pipeline.grid``);
- :mod:`.entries`: each registered entry's options, validated through its options model;
- :mod:`.rules`: the rules across keys;
- :mod:`.load`: reading, merging, validating, expanding;
- :mod:`.schema`: the JSON schema for editors (``cbench schema``).
"""

from pipeline.config.load import (
    REPLACED_WHOLE,
    ConfigError,
    expand,
    from_mapping,
    grid_spec,
    load,
    merge,
    read_yaml,
)
from pipeline.config.schema import json_schema
from pipeline.config.sections import (
    OBJECTIVES,
    STORAGE_SCHEMES,
    BoundsConfig,
    ComputeConfig,
    DataConfig,
    GeometryConfig,
    GridConfig,
    Params,
    ProbeConfig,
    ReportConfig,
    SearchConfig,
    StatsConfig,
    TrackingConfig,
    TrainConfig,
)
from pipeline.grid import Cell

__all__ = [
    "OBJECTIVES",
    "REPLACED_WHOLE",
    "STORAGE_SCHEMES",
    "BoundsConfig",
    "Cell",
    "ComputeConfig",
    "ConfigError",
    "DataConfig",
    "GeometryConfig",
    "GridConfig",
    "Params",
    "ProbeConfig",
    "ReportConfig",
    "SearchConfig",
    "StatsConfig",
    "TrackingConfig",
    "TrainConfig",
    "expand",
    "from_mapping",
    "grid_spec",
    "json_schema",
    "load",
    "merge",
    "read_yaml",
]
