"""Generate the dataset named in params and store it as Parquet with its content hash."""

from __future__ import annotations

import sys

from pipeline.datasets import load_dataset
from pipeline.runtime.context import dataset_path, resolved_params, usage_error
from pipeline.runtime.store.files import write_dataset


def main(argv: list[str] | None = None) -> int:
    if argv:
        return usage_error("prepare", argv)
    d = resolved_params().data
    ds = load_dataset(d.name, d.n_train, d.n_heldout, d.seed, d.options)
    write_dataset(ds, dataset_path(d.name))
    print(f"prepare: {ds.name} train {ds.x_train.shape} held-out {ds.x_heldout.shape} "
          f"hash {ds.content_hash()} -> {dataset_path(d.name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
