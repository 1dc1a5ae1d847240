"""The files a params file names are checked by ``resolve`` before any work
(pipeline/config/files.py, pipeline/plugins.py): a data set's files, a pretrained tower's weights,
a plugin file. A missing or unreadable one is refused with the key, the path as resolved and how
to get it; the files checked are the files the loaders read; resolve's memo checks them again
before it skips. (The missing-file messages of each kind are cases of tests/test_bad_params.py.)
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pipeline.config import ConfigError, load
from pipeline.config.files import DATA_FILES, ENCODER_FILES
from pipeline.datasets import load_dataset
from pipeline.datasets.registry import DATASETS
from pipeline.encoders.registry import ENCODERS
from stages import resolve
from tests.conftest import ROOT


def _modes_bind() -> bool:
    """Whether chmod 000 makes a file unreadable to this process: not for root with its
    capabilities (tests often run as root in a container), whom os.access and open let read."""
    if os.geteuid() != 0:
        return True
    with tempfile.NamedTemporaryFile() as f:
        os.chmod(f.name, 0)
        return not os.access(f.name, os.R_OK)


UNREADABLE_BLOCKS = pytest.mark.skipif(
    not _modes_bind(), reason="running as root, which reads a file whatever its mode bits: "
                              "chmod 000 cannot make one unreadable (run as another user, or "
                              "as root without CAP_DAC_OVERRIDE, to check this case)")
# (dataset, data.options besides the path) of every data set that reads files
READERS = [("mnist", {}), ("fashion_mnist", {"split": "train_test"}),
           ("fashion_mnist", {"split": "test"}), ("cifar10", {})]


def _idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def _write_listed(name: str, options: dict[str, Any]) -> None:
    """Exactly the files DATA_FILES lists for ``name``, small but real: 12 IDX images, or 4
    images a CIFAR batch."""
    for needed in DATA_FILES[name](options):
        if needed.kind == "folder":
            needed.path.mkdir(parents=True, exist_ok=True)
        elif name == "cifar10":
            batch = {b"data": np.zeros((4, 3072), np.uint8), b"labels": [0, 1, 2, 3]}
            needed.path.write_bytes(pickle.dumps(batch))
        elif "labels" in needed.path.name:
            _idx(needed.path, np.arange(12) % 10)
        else:
            _idx(needed.path, np.zeros((12, 28, 28)))


def _params(tiny: dict[str, Any], where: Path, name: str, options: dict[str, Any],
            **sections: Any) -> Path:
    params = copy.deepcopy(tiny)
    params["data"] |= {"name": name, "options": options, "augment": {}}
    params |= sections
    path = where / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load(path, check_files=True)
    return str(err.value)


def test_every_image_data_set_and_pretrained_encoder_says_which_files_it_reads():
    reads_files = {n for n, s in DATASETS.items()
                   if s.kind == "image" or "path" in {f.name for f in
                                                      dataclasses.fields(s.options)}}
    assert reads_files - set(DATA_FILES) == set(), "add them to DATA_FILES"
    pretrained = {n for n, e in ENCODERS.items()
                  if "weights" in {f.name for f in dataclasses.fields(e.options)}}
    assert pretrained == {"clip", "dino"} and pretrained - set(ENCODER_FILES) == set()
    assert set(DATA_FILES) <= set(DATASETS) and set(ENCODER_FILES) <= set(ENCODERS)


@pytest.mark.parametrize(("name", "options"), READERS,
                         ids=[f"{n}-{o.get('split', '')}".strip("-") for n, o in READERS])
def test_the_files_checked_are_the_files_the_loader_reads(name, options, tiny_params, tmp_path):
    options = {**options, "path": str(tmp_path / "data")}
    _write_listed(name, options)
    load_dataset(name, 8, 4, seed=0, options=options)  # the listed files are all it needs
    params = _params(tiny_params, tmp_path, name, options)
    assert load(params, check_files=True).data.name == name
    for needed in DATA_FILES[name](options):
        if needed.kind == "folder":
            continue
        needed.path.rename(tmp_path / "away")  # each listed file is one the loader reads
        with pytest.raises(FileNotFoundError, match=needed.path.name):
            load_dataset(name, 8, 4, seed=0, options=options)
        assert (f"data.options.path = {options['path']!r}: {needed.what} not found at "
                f"{needed.path}; ") in _refusal(params)
        (tmp_path / "away").rename(needed.path)
    if options.get("split") == "test":
        assert not any("train" in n.path.name for n in DATA_FILES[name](options))


def test_a_relative_path_is_taken_from_the_repository_root(tiny_params, tmp_path, monkeypatch):
    folder = tmp_path / "mnist"
    _write_listed("mnist", {"path": str(folder)})
    monkeypatch.chdir(tmp_path)  # not the repository root: "mnist" here is not what is read
    relative = os.path.relpath(folder, ROOT)
    assert load(_params(tiny_params, tmp_path, "mnist", {"path": relative}), check_files=True)
    problem = _refusal(_params(tiny_params, tmp_path, "mnist", {"path": "mnist"}))
    assert f"data.options.path = 'mnist': MNIST folder not found at {ROOT / 'mnist'}; " in problem
    assert problem.count("not found") == 1  # nothing listed under a missing folder


def test_weights_are_checked_for_the_grids_towers_only(tiny_params, tmp_path):
    weights = tmp_path / "dino.pt"
    weights.write_bytes(b"a state dict")
    dino = {"model": "vit_small_patch16_224.dino", "weights": str(weights)}
    found = _params(tiny_params, tmp_path, "digits", {}, arch_options={"dino": dino},
                    grid={**tiny_params["grid"], "arch": ["dino"]})
    assert load(found, check_files=True).arch_options["dino"]["weights"] == str(weights)
    weights.unlink()
    assert _refusal(found).startswith(
        f"arch_options.dino.weights = {str(weights)!r}: weights file not found at {weights}; "
        "on a machine with internet run `m = timm.create_model('vit_small_patch16_224.dino', "
        "pretrained=True")
    assert load(found).grid.arch == ["dino"]  # the later stages do not need the files
    unused = _params(tiny_params, tmp_path, "digits", {}, arch_options={"dino": dino})
    assert load(unused, check_files=True).grid.arch == ["linear"]  # dino is not in the grid


def test_a_clip_model_config_file_is_checked_as_well(tiny_params, tmp_path):
    weights = tmp_path / "clip.pt"
    weights.write_bytes(b"a state dict")
    clip = {"model": "configs/no-such-clip.json", "weights": str(weights)}
    problem = _refusal(_params(tiny_params, tmp_path, "digits", {}, arch_options={"clip": clip},
                               grid={**tiny_params["grid"], "arch": ["clip"]}))
    assert problem.startswith(f"arch_options.clip.model = 'configs/no-such-clip.json': model "
                              f"config not found at {ROOT / 'configs/no-such-clip.json'}; ")
    assert "weights" not in problem


def test_every_missing_plugin_file_is_named_before_any_is_imported(tiny_params, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.py").write_text("raise RuntimeError('imported')\n")
    params = _params(tiny_params, tmp_path, "laplace", {"input_dim": 16},
                     plugins=["here.py", "gone.py", "/nowhere/else.py"])
    problem = _refusal(params)
    assert problem.splitlines() == [
        f"plugins[1] = 'gone.py': plugin file not found at {tmp_path / 'gone.py'}; a relative "
        f"path is taken from the working folder ({tmp_path}): give the file's absolute path, or "
        "put the file there",
        "plugins[2] = '/nowhere/else.py': plugin file not found at /nowhere/else.py; a relative "
        f"path is taken from the working folder ({tmp_path}): give the file's absolute path, or "
        "put the file there"]


@UNREADABLE_BLOCKS
def test_unreadable_files_are_refused(tiny_params, tmp_path, monkeypatch):
    folder = tmp_path / "mnist"
    _write_listed("mnist", {"path": str(folder)})
    labels = folder / "t10k-labels-idx1-ubyte.gz"
    plugin = tmp_path / "plugin.py"
    plugin.write_text("")
    labels.chmod(0)
    plugin.chmod(0)
    monkeypatch.chdir(tmp_path)
    problem = _refusal(_params(tiny_params, tmp_path, "mnist", {"path": str(folder)}))
    assert (f"MNIST file t10k-labels-idx1-ubyte.gz is not readable (permission denied) at "
            f"{labels}; download t10k-images") in problem
    problem = _refusal(_params(tiny_params, tmp_path, "laplace", {"input_dim": 16},
                               plugins=["plugin.py"]))
    assert problem.startswith(f"plugins[0] = 'plugin.py': plugin file is not readable "
                              f"(permission denied) at {plugin}; ")
    folder.chmod(0)
    problem = _refusal(_params(tiny_params, tmp_path, "mnist", {"path": str(folder)}))
    assert f"MNIST folder is not readable (permission denied) at {folder}; " in problem
    folder.chmod(0o755)


def test_resolves_memo_checks_the_files_again_before_it_skips(tiny_params, tmp_path, monkeypatch,
                                                               capsys):
    folder = tmp_path / "mnist"
    _write_listed("mnist", {"path": str(folder)})
    _params(tiny_params, tmp_path, "mnist", {"path": str(folder)})
    monkeypatch.chdir(tmp_path)
    assert resolve.main(["--params", "params.yaml"]) == 0
    assert resolve.main(["--params", "params.yaml"]) == 0
    assert "unchanged since the last resolve" in capsys.readouterr().out  # the memo's skip
    (folder / "t10k-images-idx3-ubyte.gz").unlink()
    assert resolve.main(["--params", "params.yaml"]) == 2  # as the full stage: refused
    err = capsys.readouterr().err
    assert f"MNIST file t10k-images-idx3-ubyte.gz not found at {folder}" in err
