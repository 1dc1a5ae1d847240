"""params schema: errors name the dotted key, the value and what is allowed; cells are stable."""

from __future__ import annotations

import pytest
import yaml

from pipeline.config import ConfigError, expand, from_mapping, load, merge, rules
from pipeline.grid import cell_id_of
from tests.conftest import ROOT


def _error(raw) -> str:
    with pytest.raises(ConfigError) as info:
        from_mapping(raw)
    return str(info.value)


def test_defaults_and_expansion(tiny_params):
    params = from_mapping(tiny_params)
    cells = expand(params)
    assert len(cells) == 2
    assert [c.k for c in cells] == [4, 8]
    assert len({c.cell_id for c in cells}) == 2


def test_cell_id_is_a_hash_of_the_resolved_config(tiny_params):
    a = expand(from_mapping(tiny_params))[0]
    again = expand(from_mapping(tiny_params))[0]
    assert a.cell_id == again.cell_id == cell_id_of(a.config())
    tiny_params["train"]["epochs"] = 3
    assert expand(from_mapping(tiny_params))[0].cell_id != a.cell_id
    tiny_params["train"]["epochs"] = 2
    tiny_params["train"]["threads"] = 2  # speed only: same cell
    assert expand(from_mapping(tiny_params))[0].cell_id == a.cell_id


def test_growing_the_grid_keeps_existing_ids(tiny_params):
    before = {c.cell_id for c in expand(from_mapping(tiny_params))}
    tiny_params["grid"]["tau"] = [0.5, 0.1]
    after = {c.cell_id for c in expand(from_mapping(tiny_params))}
    assert before < after and len(after) == 4


def test_zero_temperature(tiny_params):
    tiny_params["grid"]["tau"] = [0.5, 0]
    assert _error(tiny_params) == "grid.tau[1] = 0.0: temperature must be > 0"


def test_in_batch_k_larger_than_batch(tiny_params):
    tiny_params["train"]["negatives"] = "in_batch"
    tiny_params["grid"]["k"] = [4, 600]
    assert _error(tiny_params).startswith("grid.k[1] = 600 > min(grid.batch_size) - 1 = 63")


def test_independent_negatives_allow_large_k(tiny_params):
    tiny_params["grid"]["k"] = [600]
    assert expand(from_mapping(tiny_params))[0].k == 600


def test_unknown_loss(tiny_params):
    tiny_params["grid"]["loss"] = ["infonce", "nce_typo"]
    msg = _error(tiny_params)
    assert msg.startswith("grid.loss[1] = 'nce_typo': unknown loss; allowed: [")
    assert "'infonce'" in msg


def test_n_larger_than_dataset(tiny_params):
    tiny_params["grid"]["n"] = [256, 5000]
    assert _error(tiny_params).startswith("grid.n[1] = 5000 > data.n_train = 600")


def test_unknown_key_and_wrong_type(tiny_params):
    tiny_params["train"]["epochz"] = 3
    assert _error(tiny_params).startswith("train.epochz = 3: unknown key")
    del tiny_params["train"]["epochz"]
    tiny_params["train"]["optimizer"] = "lbfgs"
    msg = _error(tiny_params)
    assert msg.startswith("train.optimizer = 'lbfgs':") and "'adam'" in msg


def test_unknown_loss_option(tiny_params):
    tiny_params["loss_options"] = {"infonce": {"temperature": 2}}
    assert _error(tiny_params).startswith("loss_options.infonce.temperature = 2: unknown option")


def test_unknown_arch_and_arch_option(tiny_params):
    tiny_params["grid"]["arch"] = ["linear", "transformer"]
    assert _error(tiny_params).startswith("grid.arch[1] = 'transformer': unknown architecture")
    tiny_params["grid"]["arch"] = ["mlp"]
    tiny_params["arch_options"] = {"mlp": {"depth": 3}}
    assert _error(tiny_params).startswith("arch_options.mlp.depth = 3: unknown option")


def test_profile_lays_keys_over_params(tmp_path, tiny_params):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({"grid": {"tau": [0.1]},
                                                     "train": {"epochs": 9}}))
    params = load(tmp_path / "params.yaml", tmp_path / "p.yaml")
    assert params.grid.tau == [0.1] and params.train.epochs == 9
    assert params.grid.k == [4, 8] and params.grid.batch_size == [64]  # untouched keys kept


def test_merge_is_recursive_and_replaces_lists():
    assert merge({"a": {"b": 1, "c": [1, 2]}}, {"a": {"c": [3]}}) == {"a": {"b": 1, "c": [3]}}


def test_missing_key(tiny_params):
    del tiny_params["train"]["lr"]
    assert _error(tiny_params) == "train.lr: missing; every key must be set (see params.yaml)"


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.yaml")


def test_labels_needed_by_supervised_losses(tiny_params):
    tiny_params["grid"]["loss"] = ["supcon"]
    assert _error(tiny_params) == ("grid.loss[0] = 'supcon': needs labels, and data.name = "
                                   "'laplace' has none")
    tiny_params["data"]["name"] = "gaussian_mixture"
    assert expand(from_mapping(tiny_params))[0].loss == "supcon"


def test_supervised_cells_ignore_contrastive_axes(tiny_params):
    tiny_params["data"]["name"] = "gaussian_mixture"
    tiny_params["grid"]["objective"] = ["contrastive", "supervised"]
    cells = expand(from_mapping(tiny_params))
    supervised = [c for c in cells if c.objective == "supervised"]
    assert len(cells) == 3 and len(supervised) == 1  # k = 4, 8 collapse into one supervised cell
    assert (supervised[0].loss, supervised[0].k, supervised[0].tau) == ("cross_entropy", 0, 0.0)


def test_schedule_target_is_the_grid_tau(tiny_params):
    tiny_params["grid"]["tau_schedule"] = ["linear"]
    tiny_params["schedule_options"] = {"linear": {"tau_start": 1.0}}
    cell = expand(from_mapping(tiny_params))[0]
    assert cell.schedule_options == {"tau_start": 1.0, "tau_end": 0.5}
    tiny_params["grid"]["tau_schedule"] = ["warp"]
    assert _error(tiny_params).startswith("grid.tau_schedule[0] = 'warp': unknown schedule")


def test_dataset_and_architecture_must_fit(tiny_params):
    tiny_params["grid"]["arch"] = ["resnet18"]
    assert _error(tiny_params).startswith("grid.arch[0] = 'resnet18': takes ['image'] inputs")
    tiny_params["grid"]["arch"] = ["linear"]
    tiny_params["data"]["options"] = {"input_dim": 0}
    assert _error(tiny_params).startswith("data.options.input_dim = 0")


def test_options_are_resolved_into_the_cell(tiny_params):
    tiny_params["grid"]["loss"] = ["weince"]
    cell = expand(from_mapping(tiny_params))[0]
    assert cell.loss_options["beta"] == "fixed" and "kappa_rho" in cell.loss_options
    assert cell.data.augment["a"] == 0.6 and cell.data.options == {"input_dim": 16}


def test_profile_replaces_dataset_options_whole():
    base = {"data": {"name": "laplace", "augment": {"a": 0.6, "noise_std": 0.2}, "seed": 0}}
    over = {"data": {"name": "gaussian_channel", "augment": {"a": 0.5}}}
    assert merge(base, over) == {"data": {"name": "gaussian_channel", "augment": {"a": 0.5},
                                          "seed": 0}}


@pytest.mark.parametrize("profile", sorted(p.name for p in (ROOT / "profiles").glob("*.yaml")))
def test_every_profile_validates(profile, monkeypatch):
    # the GPU profiles ask for more CPUs per cell than this machine has: validate them as on the
    # machine they are written for (the refusal on a small one is the test below)
    monkeypatch.setattr(rules, "local_cores", lambda: 64)
    cells = expand(load(ROOT / "params.yaml", ROOT / "profiles" / profile))
    assert cells and len({c.cell_id for c in cells}) == len(cells)


def test_a_profile_asking_for_more_cpus_than_this_machine_has_is_refused(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(rules, "local_cores", lambda: 2)
    with pytest.raises(ConfigError, match=r"compute.num_cpus = 4: a cell's task would never "
                                          r"start on the local Ray instance, which has 2 CPUs"):
        load(ROOT / "params.yaml", ROOT / "profiles" / "cifar10-resnet18-gpu.yaml")
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")  # a cluster's nodes may be larger
    monkeypatch.setenv("CBENCH_STORE", str(tmp_path))  # (a cluster run needs a shared store)
    load(ROOT / "params.yaml", ROOT / "profiles" / "cifar10-resnet18-gpu.yaml")


def test_betser_profile_is_the_papers_grid():
    params = load(ROOT / "params.yaml", ROOT / "profiles" / "betser-synthetic.yaml")
    g = params.grid
    assert params.data.name == "laplace" and params.data.options["input_dim"] == 1024
    assert g.embed_dim == [32, 64, 128, 256] and g.tau == [0.1, 0.2] and len(g.batch_size) >= 3
    assert {c.train.batch_size for c in expand(params)} == set(g.batch_size)


def test_batch_size_axis_checks(tiny_params):
    tiny_params["grid"]["batch_size"] = [64, 1]
    assert _error(tiny_params) == "grid.batch_size[1] = 1: must be >= 2"
    tiny_params["grid"]["batch_size"] = [64, 512]
    assert _error(tiny_params).startswith("grid.n[0] = 256 < max(grid.batch_size) = 512")


def test_storage_must_be_null_or_a_pyarrow_uri(tiny_params):
    tiny_params["compute"]["storage"] = "ftp://host/cells"
    assert _error(tiny_params).startswith("compute.storage = 'ftp://host/cells': must be null")
    tiny_params["compute"]["storage"] = "file:///shared/cells"
    assert from_mapping(tiny_params).compute.storage == "file:///shared/cells"


def test_the_tau_floor_is_the_search_stages():
    from pipeline.search.crn import MIN_TAU

    assert rules.MIN_TAU == MIN_TAU
