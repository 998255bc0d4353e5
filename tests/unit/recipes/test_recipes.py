"""The bundled recipes: TRL-format YAML that the recipe scripts accept, with what a run needs.

The light install has no TRL, so keys are checked against the parser table (run/parsers.json); where TRL is
installed (the image, the GPU extra) the keys are checked against TRL's dataclasses and the configs against
TRL's own parser.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from trlstack.defaults import DEFAULT_MODEL
from trlstack.recipes import RECIPES, keys_from_trl
from trlstack.run import trl_config
from trlstack.run.passthrough import accepted_keys

HAS_TRL = importlib.util.find_spec("trl") is not None
needs_trl = pytest.mark.skipif(
    not HAS_TRL, reason="TRL is not installed (light install); the gpu extra has it"
)

# The reward function names TRL 1.16's grpo/rloo scripts (and our Online DPO script) resolve.
TRL_REWARD_NAMES = {
    "accuracy_reward",
    "reasoning_accuracy_reward",
    "think_format_reward",
    "get_soft_overlong_punishment",
}


@pytest.fixture(params=sorted(RECIPES))
def recipe(request):
    return RECIPES[request.param]


def test_bundled_config_is_a_mapping_of_accepted_keys(recipe):
    config = trl_config.load_config(recipe.bundled_config)
    trl_config.check_keys(config, recipe, recipe.yaml, accepted_keys(recipe.name))
    trl_config.check_required(config, recipe, recipe.yaml)


def test_bundled_configs_are_the_main_job(recipe):
    config = yaml.safe_load(recipe.bundled_config.read_text())
    assert config["model_name_or_path"] == DEFAULT_MODEL
    assert config["dataset_name"].startswith("trl-lib/")
    assert config["report_to"] == "trackio"  # recorded in the output folder, nothing sent anywhere
    assert config["output_dir"] == f"outputs/{recipe.name}"
    assert config["save_steps"] > 0 and config["logging_steps"] > 0
    for name in config.get("reward_funcs", []):
        assert name in TRL_REWARD_NAMES
    # train decides these per machine; a recipe that fixed them would fight the flags
    assert not {"use_vllm", "vllm_mode", "vllm_server_base_url", "bf16", "fp16"} & set(config)


def test_group_sizes_divide_the_batch(recipe):
    config = yaml.safe_load(recipe.bundled_config.read_text())
    if "num_generations" in config:
        assert config["per_device_train_batch_size"] % config["num_generations"] == 0


def test_the_recipe_module_of_our_own_is_packaged():
    spec = importlib.util.find_spec(RECIPES["online-dpo"].module)
    assert spec is not None and spec.origin.endswith("rank/online_dpo.py")


@needs_trl
@pytest.mark.parametrize("name", sorted(RECIPES))
def test_accepted_keys_are_the_installed_trl_dataclasses_fields(name):
    assert sorted(accepted_keys(name) - {"env"}) == keys_from_trl(name)


@needs_trl
def test_trl_scripts_know_the_reward_names():
    for module in ("trl.scripts.grpo", "trl.scripts.rloo"):
        source = Path(importlib.util.find_spec(module).origin).read_text()
        assert set(re.findall(r'^\s+"(\w+)": ', source, re.MULTILINE)) >= TRL_REWARD_NAMES


@needs_trl
def test_trl_parses_the_bundled_configs(recipe, tmp_path):
    import importlib

    module = importlib.import_module(recipe.module)
    parser = module.make_parser()
    parsed = parser.parse_args_and_config(
        ["--config", str(recipe.bundled_config), "--output_dir", str(tmp_path), "--use_cpu", "true"],
        fail_with_unknown_args=True,
    )
    # ModelConfig holds the model; async-grpo's script arguments do, as it takes no ModelConfig
    (model,) = {args.model_name_or_path for args in parsed if hasattr(args, "model_name_or_path")}
    assert model == DEFAULT_MODEL
    assert parsed[0].dataset_name.startswith("trl-lib/")
