"""run/pipeline.py: async-grpo's pipeline settings, each a flag and a variable of train (its --help group
async-grpo), declared once and reaching the config key PIPELINE names; a value of the wrong kind is refused
by flag and by variable."""

from __future__ import annotations

import dataclasses

import pytest
from trlstack.errors import UsageError
from trlstack.options import Setting
from trlstack.roles.command_line import parse_role
from trlstack.roles.train.main import ROLE
from trlstack.run.asynchronous import config_keys
from trlstack.run.passthrough import accepted_keys
from trlstack.run.pipeline import GROUP, PIPELINE
from trlstack.run.settings import TrainSettings


def declared() -> dict[str, Setting]:
    """TrainSettings' fields in the async-grpo --help group, by name, with their declarations."""
    found = {}
    for field in dataclasses.fields(TrainSettings):
        specs = [value for value in field.metadata.values() if isinstance(value, Setting)]
        if specs and specs[0].group == GROUP:
            found[field.name] = specs[0]
    return found


def test_every_setting_of_the_group_is_in_pipeline_by_its_flag_and_variable():
    settings = declared()
    assert sorted(settings) == sorted(name for name, _, _ in PIPELINE.values())
    for flag, (name, key, env) in PIPELINE.items():
        assert flag == "--" + name.replace("_", "-")
        assert settings[name].env == env, flag
        assert key in accepted_keys("async-grpo"), f"{key} is no field of TRL's AsyncGRPOConfig"


@pytest.mark.parametrize(("flag", "name", "key", "env"), [(f, *entry) for f, entry in PIPELINE.items()])
def test_each_reaches_its_config_key_by_flag_and_by_variable(flag, name, key, env):
    by_flag, _ = parse_role(ROLE, TrainSettings, ["async-grpo", flag, "7"], {})
    by_variable, _ = parse_role(ROLE, TrainSettings, ["async-grpo"], {env: "7"})
    assert getattr(by_flag, name) == getattr(by_variable, name) == 7
    assert config_keys(by_flag)[key] == config_keys(by_variable)[key] == 7
    unset, _ = parse_role(ROLE, TrainSettings, ["async-grpo"], {})
    assert key not in config_keys(unset)  # the config's own value stands


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--max-staleness", "-1"], "not a whole number"),
        (["--weight-sync-steps", "0"], "not a positive whole number"),
        (["--weight-sync-timeout", "1.5"], "not a whole number"),
        (["--heartbeat-timeout", "0"], "not a positive number"),
        (["--server-lost-after", "-5"], "not a positive number"),
    ],
)
def test_bad_pipeline_values_are_refused(argv, problem):
    with pytest.raises(UsageError, match=f"{argv[0]}: .*{problem}"):
        parse_role(ROLE, TrainSettings, ["async-grpo", *argv], {})


@pytest.mark.parametrize("flag", sorted(PIPELINE))
def test_a_variable_of_the_wrong_kind_is_refused_naming_it_and_its_flag(flag):
    env = PIPELINE[flag][2]
    with pytest.raises(UsageError, match=f"^{env}='soon' is not valid for {flag}: .* Fix or unset {env}."):
        parse_role(ROLE, TrainSettings, ["async-grpo"], {env: "soon"})
