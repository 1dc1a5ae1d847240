"""The files and folders a params file names, checked by ``resolve`` before any work.

A data set's files (``data.options.path``) and a pretrained tower's weights
(``arch_options.<arch>.weights``; a CLIP ``model`` given as a local ``.json`` too): a missing or
unreadable one is refused with the key, the path as the loader resolves it (relative paths from
the repository root, :func:`pipeline.datasets.images.resolve_path`) and how to get the file (the
loader's own instructions). Plugin files are checked where they are imported
(:func:`pipeline.plugins.load_plugins`).

Which files an entry's loader reads is said here, keyed by its registry name
(:data:`DATA_FILES`, :data:`ENCODER_FILES`), not in the registry entries: those are part of
every cell's code fingerprint (:mod:`pipeline.fingerprint`), and a new field there would make
every cell retrain once. ``tests/test_bad_params.py`` holds that every registered image data set
and every encoder with a ``weights`` option has an entry here.

Only the grid's data set and encoders are checked, and only by ``resolve``
(:func:`pipeline.config.load.load` with ``check_files``): the later stages read the prepared
data set and the cells, and a profile is valid params on a machine without its data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config.sections import Params
from pipeline.datasets.images import (
    CIFAR_HOWTO,
    FASHION_FILES,
    FASHION_HOWTO,
    MNIST_FILES,
    MNIST_HOWTO,
    resolve_path,
)
from pipeline.encoders.pretrained import CLIP_HOWTO, DINO_HOWTO
from pipeline.readable import Kind, unreadable

CIFAR_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")  # cifar10_dataset's
CLIP_CONFIG_HOWTO = ("an open_clip model config is a name from open_clip.list_models() or a local "
                     ".json file (open_clip's model_configs/<name>.json, or a checkpoint's "
                     "open_clip_config.json)")


@dataclass(frozen=True)
class Needed:
    """A file or folder an entry's loader reads: ``option`` names it, ``path`` as resolved,
    ``what`` in words ("MNIST file t10k-images-idx3-ubyte.gz"), ``howto`` how to get it."""

    option: str
    path: Path
    kind: Kind
    what: str
    howto: str


Reads = Callable[[Mapping[str, Any]], list[Needed]]  # an entry's resolved options -> its files


def _nothing(options: Mapping[str, Any]) -> list[Needed]:
    return []


def _in_folder(what: str, files: Callable[[Mapping[str, Any]], tuple[str, ...]],
               howto: str) -> Reads:
    """The folder ``path`` and the ``files(options)`` in it."""
    def reads(options: Mapping[str, Any]) -> list[Needed]:
        if not options.get("path"):  # a bad value: its own problem
            return []
        folder = resolve_path(options["path"])
        return [Needed("path", folder, "folder", f"{what} folder", howto),
                *(Needed("path", folder / f, "file", f"{what} file {f}", howto)
                  for f in files(options))]
    return reads


def _weights(howto: str) -> Reads:
    """A pretrained tower's ``weights`` file (and a CLIP ``model`` given as a local .json)."""
    def reads(options: Mapping[str, Any]) -> list[Needed]:
        model = str(options.get("model", ""))
        out = []
        if options.get("weights"):  # None is refused by the options' own check
            out.append(Needed("weights", resolve_path(options["weights"]), "file",
                              "weights file", howto.replace("<model>", model)))
        if model.endswith(".json"):  # pipeline.encoders.pretrained.clip_model_config's rule
            out.append(Needed("model", resolve_path(model), "file", "model config",
                              CLIP_CONFIG_HOWTO))
        return out
    return reads


DATA_FILES: dict[str, Reads] = {
    "mnist": _in_folder("MNIST", lambda o: MNIST_FILES, MNIST_HOWTO),
    # split test: the loader reads the test files only
    "fashion_mnist": _in_folder(
        "Fashion-MNIST", lambda o: FASHION_FILES["test"] + (
            FASHION_FILES["train"] if o.get("split") == "train_test" else ()), FASHION_HOWTO),
    "cifar10": _in_folder("CIFAR-10", lambda o: CIFAR_FILES, CIFAR_HOWTO),
    "digits": _nothing,  # scikit-learn ships it
}
ENCODER_FILES: dict[str, Reads] = {
    "clip": _weights(CLIP_HOWTO),
    "dino": _weights(DINO_HOWTO),
}


def needed(p: Params) -> Iterator[tuple[str, Any, list[Needed]]]:
    """(dotted key, its value, the files it names) for the grid's data set and encoders, with
    their options filled in (:func:`pipeline.config.load.from_mapping`)."""
    named: list[tuple[str, Mapping[str, Any], Reads]] = []
    if p.data.name in DATA_FILES:
        named.append(("data.options", p.data.options, DATA_FILES[p.data.name]))
    for arch in dict.fromkeys(p.grid.arch):  # each once, in the grid's order
        if arch in ENCODER_FILES:
            named.append((f"arch_options.{arch}", p.arch_options.get(arch, {}),
                          ENCODER_FILES[arch]))
    for where, options, reads in named:
        files = reads(options)
        for option in dict.fromkeys(n.option for n in files):
            yield f"{where}.{option}", options[option], [n for n in files if n.option == option]


def problems(p: Params) -> Iterator[str]:
    """One line per key whose files are missing or unreadable: ``<key> = <value>: <what> not
    found at <path>; ...; <how to get it>``. Nothing under a missing folder is listed."""
    for key, value, files in needed(p):
        wrong: list[str] = []
        gone: list[Path] = []
        for n in files:
            if any(folder in n.path.parents for folder in gone):
                continue
            why = unreadable(n.path, n.kind)
            if why:
                wrong.append(f"{n.what} {why} at {n.path}")
                if n.kind == "folder":
                    gone.append(n.path)
        if wrong:
            yield f"{key} = {value!r}: {'; '.join(wrong)}; {files[0].howto}"
