"""``cbench schema``: a JSON schema of params.yaml that editors can use; it accepts the default
params and every profile, rejects what ``resolve`` rejects by type, range or name, and the copies
in the repository are current."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from pipeline.cli import main as cbench
from pipeline.config import json_schema, read_yaml
from tests.conftest import ROOT

PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))


def test_default_params_validate():
    jsonschema.validate(read_yaml(ROOT / "params.yaml"), json_schema())


@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_every_profile_validates(profile):
    jsonschema.validate(read_yaml(profile), json_schema(partial=True))


@pytest.mark.parametrize(("path", "value"), [
    (("grid", "loss"), ["nce_typo"]),
    (("grid", "k"), [4.5]),
    (("grid", "tau"), []),
    (("loss_options",), {"weince": {"beta": "x"}}),
    (("loss_options",), {"infonce": {"temperature": 1.0}}),
    (("arch_options",), {"mlp": {"hidden": [0]}}),
    (("data", "augment"), {"dropout": 1.0}),
    (("data", "options"), {"colour": "red"}),
    (("train", "precision"), "fp16"),
    (("report", "columns"), ["cv"] * 9),
    (("extras",), 1),
])
def test_schema_rejects_bad_values(path, value):
    params = copy.deepcopy(read_yaml(ROOT / "params.yaml"))
    node = params
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(params, json_schema())


def test_a_profile_needs_no_key_but_a_params_file_needs_them_all():
    jsonschema.validate({"grid": {"tau": [0.1]}}, json_schema(partial=True))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"grid": {"tau": [0.1]}}, json_schema())


def test_the_committed_schemas_are_current(tmp_path):
    for name, partial in (("params.schema.json", False), ("profiles/schema.json", True)):
        assert json.loads((ROOT / name).read_text()) == json_schema(partial=partial), (
            f"{name} is stale: run `cbench schema{' --profile' if partial else ''} -o {name}`")


def test_cli_prints_the_schema(capsys, tmp_path):
    assert cbench(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "contrastive-bench params"
    out = tmp_path / "s.json"
    assert cbench(["schema", "--profile", "-o", str(out)]) == 0
    assert "required" not in out.read_text()
