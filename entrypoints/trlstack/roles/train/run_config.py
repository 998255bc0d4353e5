"""The config that says what a run is, pure: the user's, checked against the recipe, with train's overrides
(--model, --dataset, --reward-model) and the smoke run's keys; not yet train's choices for the machine
(launch.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.roles.train import asynchronous
from trlstack.roles.train.settings import TrainSettings

# --cpu: a few tiny steps that show the whole pipeline works on any machine; not a useful training run.
SMOKE: dict[str, Any] = {
    "use_vllm": False,
    "use_cpu": True,
    "bf16": False,
    "fp16": False,
    "max_steps": 2,
    "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 1,
    "gradient_checkpointing": False,
    "warmup_steps": 0,
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_steps": 1,
    "report_to": "none",
    "dataloader_num_workers": 0,
}
SMOKE_BY_RECIPE: dict[str, dict[str, Any]] = {
    "grpo": {"num_generations": 2, "max_completion_length": 16, "log_completions": False},
    "rloo": {"num_generations": 2, "max_completion_length": 16, "log_completions": False},
    "online-dpo": {"max_new_tokens": 16, "max_length": 128},
}


def model_init_kwargs(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The config's model_init_kwargs, a mapping (given after `--`, a JSON string); UsageError otherwise."""
    value = config.get("model_init_kwargs")
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, dict):
        raise UsageError(f"{source}: model_init_kwargs must be a mapping, e.g. {{dtype: bfloat16}}.")
    return dict(value)


def run_config(
    settings: TrainSettings, user_config: Mapping[str, Any], recipe: Recipe, source: str
) -> dict[str, Any]:
    """The config that says what the run is: the user's, checked against the recipe, with --model, --dataset
    and --reward-model applied, and the smoke run's keys with --cpu (not yet train's choices for the machine);
    UsageError naming unknown keys and what is missing."""
    from trlstack import trainconfig  # YAML: not imported for --help

    asynchronous.check(settings, recipe)  # what a server-only recipe cannot do, before the config
    trainconfig.check_keys(user_config, recipe, source)
    config = dict(user_config)
    overrides = {
        "model_name_or_path": settings.model,
        "dataset_name": settings.dataset,
    }
    if recipe.reward_model_key:
        overrides[recipe.reward_model_key] = settings.reward_model
    config.update({key: value for key, value in overrides.items() if value})
    if settings.dataset:
        config.pop("datasets", None)  # TRL prefers `datasets` over dataset_name; the flag must win
    trainconfig.check_required(config, recipe, source)
    if recipe.server_only:
        asynchronous.check_config(config, source)
    if settings.cpu:
        config.update(SMOKE, **SMOKE_BY_RECIPE[recipe.name])
    return config
