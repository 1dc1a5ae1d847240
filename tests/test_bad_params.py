"""Every constraint knowable before training fails in ``resolve``, naming the key, the value and
what is allowed, and nothing is written. Each case edits the tiny params (tests/conftest.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.config import load
from stages import resolve
from tests.conftest import ROOT

DELETE = object()
TWO_LOSSES = {"grid.loss": ["infonce", "weince"], "grid.k": [4]}

# (id, {dotted key: new value}, text the error must contain)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("empty-axis", {"grid.loss": []}, "grid.loss = []: list should have at least 1 item"),
    ("empty-seeds", {"grid.seed": []}, "grid.seed = []: list should have at least 1 item"),
    ("zero-tau", {"grid.tau": [0.5, 0.0]}, "grid.tau[1] = 0.0: temperature must be > 0"),
    ("infinite-tau", {"grid.tau": [float("inf")]}, "grid.tau[0] = inf: input should be a finite"),
    ("duplicate-k", {"grid.k": [4, 4]}, "grid.k[1] = 4: duplicate value"),
    ("zero-k", {"grid.k": [0]}, "grid.k[0] = 0: must be >= 1"),
    ("string-k", {"grid.k": ["4"]}, "grid.k[0] = '4': input should be a valid integer"),
    ("fractional-k", {"grid.k": [4.5]}, "grid.k[0] = 4.5: input should be a valid integer"),
    ("bool-seed", {"grid.seed": [True]}, "grid.seed[0] = True: input should be a valid integer"),
    ("batch-of-one", {"grid.batch_size": [1]}, "grid.batch_size[0] = 1: must be >= 2"),
    ("n-above-train", {"grid.n": [5000]}, "grid.n[0] = 5000 > data.n_train = 600"),
    ("n-below-batch", {"grid.n": [32]}, "grid.n[0] = 32 < max(grid.batch_size) = 64"),
    ("unknown-loss", {"grid.loss": ["nce_typo"]}, "grid.loss[0] = 'nce_typo': unknown loss"),
    ("unknown-schedule", {"grid.tau_schedule": ["warp"]},
     "grid.tau_schedule[0] = 'warp': unknown schedule"),
    ("unknown-objective", {"grid.objective": ["generative"]},
     "grid.objective[0] = 'generative': unknown objective"),
    ("image-encoder-on-vectors", {"grid.arch": ["resnet18"]},
     "grid.arch[0] = 'resnet18': takes ['image'] inputs"),
    ("supervised-without-labels", {"grid.objective": ["supervised"]},
     "'supervised' needs class labels"),
    ("labels-needed", {"grid.loss": ["supcon"]}, "grid.loss[0] = 'supcon': needs labels"),
    ("weince-k-2", {"grid.loss": ["weince"], "grid.k": [2, 8]},
     "grid.k[0] = 2: loss 'weince' needs k >= 3"),
    ("in-batch-k", {"train.negatives": "in_batch", "grid.k": [64]},
     "grid.k[0] = 64 > min(grid.batch_size) - 1 = 63"),
    ("unknown-key", {"train.epochz": 3}, "train.epochz = 3: unknown key"),
    ("unknown-section", {"extras": {"a": 1}}, "extras = {'a': 1}: unknown key"),
    ("missing-key", {"train.lr": DELETE}, "train.lr: missing"),
    ("lr-as-text", {"train.lr": "0.001"}, "train.lr = '0.001': input should be a valid number "
                                         "(the quotes make '0.001' text"),
    ("unknown-optimizer", {"train.optimizer": "lbfgs"}, "train.optimizer = 'lbfgs': input should "
                                                      "be 'adam' or 'sgd'"),
    ("zero-threads", {"train.threads": 0}, "train.threads = 0: input should be greater than or"),
    ("unknown-precision", {"train.precision": "fp16"}, "train.precision = 'fp16': input should be"),
    ("unknown-code-policy", {"train.on_code_change": "ignore"}, "train.on_code_change = 'ignore'"),
    ("dropout-one", {"data.augment": {"dropout": 1.0}},
     "data.augment.dropout = 1.0: input should be less than 1"),
    ("channel-a", {"data.augment": {"a": 1.5}}, "data.augment.a = 1.5: input should be less than"),
    ("zero-input-dim", {"data.options": {"input_dim": 0}},
     "data.options.input_dim = 0: input should be greater than 0"),
    ("unknown-data-option", {"data.options": {"colour": "red"}},
     "data.options.colour = 'red': unknown option for dataset 'laplace'"),
    ("unknown-dataset", {"data.name": "imagenet"}, "data.name = 'imagenet': unknown dataset"),
    ("tiny-heldout", {"data.n_heldout": 4}, "data.n_heldout = 4: input should be greater than"),
    ("anchors-above-pool", {"search.anchors": 150}, "search.anchors = 150 > data.n_heldout / 2"),
    ("k-sweep-zero", {"search.k_sweep": [2, 0]}, "search.k_sweep[1] = 0: input should be greater"),
    ("k-sweep-duplicate", {"search.k_sweep": [2, 2]}, "search.k_sweep[1] = 2: duplicate value"),
    ("fit-range", {"search.fit_k_min": 16, "search.fit_k_max": 8},
     "search.fit_k_max = 8: must be >= search.fit_k_min = 16"),
    ("tiny-pool", {"search.pool": 1},
     "search.pool = 1: input should be greater than or equal to 2"),
    ("unknown-search-encoder", {"search.encoders": ["trained", "final"]},
     "search.encoders[1] = 'final': input should be 'trained' or 'initial'"),
    ("baseline-not-in-grid", {**TWO_LOSSES, "report.baseline": "dcl"},
     "report.baseline = 'dcl': not a loss of the grid"),
    ("baseline-unknown", {"report.baseline": "nope"}, "report.baseline = 'nope': unknown loss"),
    ("group-by-seed", {"report.group_by": ["loss", "seed"]},
     "report.group_by[1] = 'seed': must be a grid axis other than seed"),
    ("level-above-one", {"report.level": 1.5}, "report.level = 1.5: input should be less than 1"),
    ("nine-columns", {"report.columns": ["cv", "ad_mean", "ad_pass_frac", "dp_p_mean",
                                         "dp_pass_frac", "recall_at_1", "risk_keval", "ce",
                                         "bound"]},
     "report.columns = ['cv', "),
    ("unknown-metric", {"report.metrics": ["cv", "accuracy"]},
     "report.metrics[1] = 'accuracy': not a metric of the registry"),
    ("unknown-column", {"report.columns": ["cv", "recall@1"]},
     "report.columns[1] = 'recall@1': not a metric of the registry"),
    ("unknown-primary", {"report.primary": "score"}, "report.primary = 'score': not a metric"),
    ("unranked-primary", {"report.primary": "cv"},
     "report.primary = 'cv': a statistic with no better direction cannot rank the rows"),
    ("zero-top", {"report.top": 0}, "report.top = 0: input should be greater than or equal to 1"),
    ("empty-tracking-uri", {"tracking.uri": ""}, "tracking.uri = '': string should have at least"),
    ("sqlite-two-slashes", {"tracking.uri": "sqlite://mlruns.db"},
     "tracking.uri = 'sqlite://mlruns.db': a SQLite store is written sqlite:///<path>"),
    ("tracking-scheme", {"tracking.uri": "ftp://host/mlruns"},
     "tracking.uri = 'ftp://host/mlruns': unknown scheme 'ftp'"),
    ("fractional-gpus-above-one", {"compute.num_gpus": 1.5},
     "compute.num_gpus = 1.5: above 1 it must be a whole number"),
    ("storage-scheme", {"compute.storage": "ftp://host/cells"},
     "compute.storage = 'ftp://host/cells': must be null"),
    ("empty-ray-address", {"compute.ray_address": ""}, "compute.ray_address = '': string should"),
    ("zero-cpus", {"compute.num_cpus": 0}, "compute.num_cpus = 0: input should be greater than 0"),
    ("epoch-past-training", {"stats.epochs": [0, 99]}, "stats.epochs[1] = 99: must be in [0, "),
    ("duplicate-epochs", {"stats.epochs": [0, 0]}, "stats.epochs[1] = 0: duplicate value"),
    ("projections-above-d", {"stats.projections": 32},
     "stats.projections = 32 > min(grid.embed_dim) = 8"),
    ("weince-beta", {"loss_options": {"weince": {"beta": "x"}}},
     "loss_options.weince.beta = 'x': input should be 'fixed' or 'fitted'"),
    ("loss-option-unknown", {"loss_options": {"infonce": {"temperature": 2}}},
     "loss_options.infonce.temperature = 2: unknown option for loss 'infonce'; allowed: none"),
    ("options-of-unknown-loss", {"loss_options": {"bogus": {}}},
     "loss_options.bogus: unknown name"),
    ("schedule-bounds", {"grid.tau_schedule": ["log_anneal"], "grid.tau": [0.5],
                         "schedule_options": {"log_anneal": {"tau_max": 0.2}}},
     "schedule_options.log_anneal (with tau_min = grid.tau 0.5).tau_min = 0.5: must be < tau_max"),
    ("learnable-target-outside", {"grid.tau_schedule": ["learnable"], "grid.tau": [5.0]},
     "tau_init = 5.0: must be in [tau_min, tau_max]"),
    ("mlp-hidden", {"grid.arch": ["mlp"], "arch_options": {"mlp": {"hidden": [0]}}},
     "arch_options.mlp.hidden[0] = 0: input should be greater than 0"),
    ("clip-without-weights", {"data.name": "digits", "data.options": {}, "data.augment": {},
                              "data.n_train": 600, "grid.arch": ["clip"]},
     "arch_options.clip.weights = None: a path to a local weights file is required"),
    ("one-class-simplex", {"geometry.class_counts": [[10]]},
     "geometry.class_counts[0] = [10]: list should have at least 2 items"),
    ("simplex-dimension", {"geometry.d": 2, "geometry.class_counts": [[5, 5, 5, 5, 5, 5]]},
     "6 classes need geometry.d >= 5"),
    ("knn-above-bank", {"probe.knn_k": [20, 700]}, "probe.knn_k[1] = 700 > data.n_train = 600"),
    ("val-fraction-one", {"probe.val_fraction": 1.0}, "probe.val_fraction = 1.0: input should be"),
    ("empty-c-grid", {"probe.c_grid": []}, "probe.c_grid = []: list should have at least 1"),
    ("negative-c", {"probe.c_grid": [1.0, -1.0]}, "probe.c_grid[1] = -1.0: input should be"),
    ("delta-zero", {"bounds.delta": 0.0}, "bounds.delta = 0.0: input should be greater than 0"),
    ("plugin-missing", {"plugins": ["no_such_plugin_module"]},
     "plugins[0] = 'no_such_plugin_module': cannot import it"),
    # knowable before work, and once failing later (issue 21): seeds, the search's τ floor, the
    # slope's k-range, a task no node can run
    ("negative-data-seed", {"data.seed": -1},
     "data.seed = -1: input should be greater than or equal to 0"),
    ("huge-data-seed", {"data.seed": 2**64},
     "data.seed = 18446744073709551616: input should be less"),
    ("negative-grid-seed", {"grid.seed": [0, -3]}, "grid.seed[1] = -3: must be >= 0"),
    ("negative-geometry-seed", {"geometry.seed": -1},
     "geometry.seed = -1: input should be greater"),
    ("tau-below-search-floor", {"grid.tau": [0.5, 0.002]},
     "grid.tau[1] = 0.002: the search stage needs τ > 0.00282"),
    ("fit-range-above-sweep", {"search.fit_k_min": 128},
     "search.fit_k_min = 128, search.fit_k_max = None: the slope of |CE − R_k| needs at least 2"),
    ("fit-range-one-k", {"search.fit_k_min": 5, "search.fit_k_max": 7},
     "needs at least 2 k's of the sweep in that range"),
    ("cpus-above-the-machine", {"compute.num_cpus": 4096},
     "compute.num_cpus = 4096: a cell's task would never start on the local Ray instance"),
    # the files the params name (issue 46): the key, the path as resolved (relative ones from the
    # repository root) and how to get it; the other cases are tests/test_named_files.py's
    ("mnist-files-missing", {"data.name": "mnist", "data.options": {"path": "no/such/mnist"},
                             "data.augment": {}},
     f"data.options.path = 'no/such/mnist': MNIST folder not found at {ROOT}/no/such/mnist; "
     "download t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz"),
    ("fashion-mnist-files-missing", {"data.name": "fashion_mnist", "data.augment": {},
                                     "data.options": {"path": "/no/such/fashion"}},
     "data.options.path = '/no/such/fashion': Fashion-MNIST folder not found at "
     "/no/such/fashion; apt-get install dataset-fashion-mnist"),
    ("cifar10-files-missing", {"data.name": "cifar10", "data.options": {"path": "/no/cifar"},
                               "data.augment": {}},
     "data.options.path = '/no/cifar': CIFAR-10 folder not found at /no/cifar; download "
     "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
    ("dino-weights-missing", {"data.name": "digits", "data.options": {}, "data.augment": {},
                              "grid.arch": ["dino"],
                              "arch_options": {"dino": {"weights": "models/no-such-dino.pt"}}},
     f"arch_options.dino.weights = 'models/no-such-dino.pt': weights file not found at {ROOT}/"
     "models/no-such-dino.pt; on a machine with internet run `m = timm.create_model("
     "'vit_small_patch16_224.dino', pretrained=True"),
    ("clip-weights-missing", {"data.name": "digits", "data.options": {}, "data.augment": {},
                              "grid.arch": ["clip"],
                              "arch_options": {"clip": {"weights": "/no/such/clip.pt"}}},
     "arch_options.clip.weights = '/no/such/clip.pt': weights file not found at "
     "/no/such/clip.pt; on a machine with internet run `model, _, _ = open_clip."
     "create_model_and_transforms('ViT-B-32'"),
    ("plugin-file-missing", {"plugins": ["no_such_plugin.py"]},
     "plugins[0] = 'no_such_plugin.py': plugin file not found at /"),
]


def _set(params: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = params
    for key in parents:
        node = node.setdefault(key, {})
    if value is DELETE:
        del node[leaf]
    else:
        node[leaf] = value


def _resolve(tmp_path: Path, monkeypatch, text: str, capsys) -> tuple[int, str]:
    (tmp_path / "params.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    code = resolve.main(["--params", "params.yaml"])
    out = capsys.readouterr()
    return code, out.err + out.out


@pytest.mark.parametrize(("edits", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_params_are_rejected_before_any_work(edits, message, tiny_params, tmp_path,
                                                 monkeypatch, capsys):
    params = copy.deepcopy(tiny_params)
    for key, value in edits.items():
        _set(params, key, value)
    code, text = _resolve(tmp_path, monkeypatch, yaml.safe_dump(params), capsys)
    assert code == 2, text
    assert message in text
    assert "Traceback" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # nothing written


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


def test_every_problem_is_reported_at_once(tiny_params, tmp_path, monkeypatch, capsys):
    tiny_params["grid"]["tau"] = [0.0]
    tiny_params["train"]["lr"] = -1.0
    tiny_params["compute"]["num_gpus"] = 2.5
    code, text = _resolve(tmp_path, monkeypatch, yaml.safe_dump(tiny_params), capsys)
    assert code == 2 and "train.lr = -1.0" in text  # pydantic errors come first, alone


def test_yaml_syntax_errors_name_the_file_line_and_column(tmp_path, monkeypatch, capsys):
    code, text = _resolve(tmp_path, monkeypatch, "grid:\n  k: [4, 8\n  tau: 0.5\n", capsys)
    assert code == 2 and "Traceback" not in text
    assert "params.yaml:3:" in text and "YAML syntax error" in text


def test_exponent_notation_is_a_number(tiny_params, tmp_path):
    text = yaml.safe_dump(tiny_params).replace("lr: 0.001", "lr: 1e-3")
    assert "lr: 1e-3" in text
    (tmp_path / "params.yaml").write_text(text)
    assert load(tmp_path / "params.yaml").train.lr == 0.001


def test_a_missing_profile_is_named(tiny_params, tmp_path, monkeypatch, capsys):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    monkeypatch.chdir(tmp_path)
    assert resolve.main(["--params", "params.yaml", "--profile", "profiles/nope.yaml"]) == 2
    assert "params file 'profiles/nope.yaml' does not exist" in capsys.readouterr().err
