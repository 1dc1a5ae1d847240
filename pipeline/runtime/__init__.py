"""Runtime adapters: the only package that imports ray, dask, mlflow and pyarrow."""
