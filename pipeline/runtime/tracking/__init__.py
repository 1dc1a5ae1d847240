"""MLflow: the only place that writes to the tracking store.

- :mod:`.runs`: a parent run per invocation, exactly one run per cell version, batched writes;
- :mod:`.sql_writer`: many runs in one transaction of a local SQLite store, schema-checked;
- :mod:`.report_metrics`: the report stage's metrics and artifacts into the cells' runs;
- :mod:`.report_logger`: that logging in a second process, alongside the report's build.
"""
