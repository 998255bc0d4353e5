"""The run's TRL config: the user's YAML in TRL's format, checked against the recipe's keys, with train's
overrides (--model, --dataset, --reward-model) and the smoke run's keys (`run_config`), the local paths it
names checked to exist (`check_paths`), later merged with what the launch stages decide for the machine (vLLM
mode, precision, attention, resume), and written where the run writes (outputs.merged_path).

The user's file is never modified; train writes the merged copy into output_dir, atomically. YAML is imported
only where a file is read or written, so that `--help` does not pay for it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.models import check_local_path
from trlstack.recipes import Recipe
from trlstack.run import passthrough
from trlstack.run.settings import TrainSettings

# TRL settings (argparse dests) train decides itself, and what to do instead; given after `--` they would
# override it unseen.
TAKEN = {
    "config": "use --config (before `--`)",
    "output_dir": "use --output-dir (checkpoints are looked for there)",
    "use_vllm": "use --cpu for a run without vLLM",
    "vllm_mode": "use --vllm-mode",
    "vllm_server_base_url": "use --vllm-url",
    "vllm_group_port": "use --group-port",
    "bf16": "use bf16/fp16 in the config file",
    "fp16": "use bf16/fp16 in the config file",
    "enable_jit_checkpoint": "train saves a checkpoint when stopped, in every process together",
}


def load_config(path: Path) -> dict[str, Any]:
    """The YAML mapping at `path`; UsageError naming the problem for a missing or malformed file."""
    if not path.exists():
        raise UsageError(
            f"config file {path} does not exist. Pass --config ({Env.CONFIG}) a YAML file in TRL's "
            "format, or leave it out to use the recipe's bundled config."
        )
    if not path.is_file():
        raise UsageError(f"config {path} is not a file; pass --config the path of a YAML file.")
    import yaml

    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(error, "problem", None) or str(error)
        raise UsageError(f"config file {path} is not valid YAML{where}: {problem}. Fix the file.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read config file {path}: {error}.") from None
    if not isinstance(config, dict):
        raise UsageError(
            f"config file {path} must be a YAML mapping of TRL config keys (e.g. `learning_rate: 1.0e-6`), "
            f"not a {type(config).__name__}."
        )
    bad = [key for key in config if not isinstance(key, str)]
    if bad:
        raise UsageError(f"config file {path} has non-text keys {bad}; TRL config keys are field names.")
    return config


def unknown_keys(config: Mapping[str, Any], accepted: frozenset[str]) -> list[str]:
    """Each key of `config` the recipe's script would not accept (`accepted`: its fields,
    passthrough.accepted_keys), with the nearest valid name where one is close: `lerning_rate (did you mean
    learning_rate?)`."""
    described = []
    for key in sorted(set(config) - accepted):
        near = difflib.get_close_matches(key, accepted, n=1)
        described.append(f"{key} (did you mean {near[0]}?)" if near else key)
    return described


def check_keys(config: Mapping[str, Any], recipe: Recipe, source: str, accepted: frozenset[str]) -> None:
    """UsageError naming every key the recipe's script would not accept (`accepted`: its fields), with the
    nearest valid names."""
    unknown = unknown_keys(config, accepted)
    if unknown:
        raise UsageError(
            f"{source} has keys the {recipe.name} script does not accept: {', '.join(unknown)}. "
            f"Use field names of {recipe.describe_dataclasses()} (trl 1.16), or remove them."
        )


def missing_keys(config: Mapping[str, Any], recipe: Recipe) -> list[str]:
    """What a run cannot do without and `config` lacks: a model, a dataset, and a judge of completions."""
    missing = []
    if not config.get("model_name_or_path"):
        missing.append(f"model_name_or_path (or pass --model / {Env.MODEL})")
    if not config.get("dataset_name") and not config.get("datasets"):
        missing.append(f"dataset_name or datasets (or pass --dataset / {Env.DATASET})")
    if not any(config.get(key) for key in recipe.reward_keys):
        missing.append(" or ".join(recipe.reward_keys) + f" (or pass --reward-model / {Env.REWARD_MODEL})")
    return missing


def check_required(config: Mapping[str, Any], recipe: Recipe, source: str) -> None:
    """UsageError naming what a run cannot do without: a model, a dataset, and a judge of completions."""
    missing = missing_keys(config, recipe)
    if missing:
        raise UsageError(f"{source} is missing required keys: {'; '.join(missing)}.")


def with_passed(config: Mapping[str, Any], extra: Sequence[str], recipe: Recipe) -> dict[str, Any]:
    """The config as the recipe's script will see it: the values given after `--` over the file's, each read
    as JSON, else as YAML, else kept as written (TRL's parser types them by its fields: numbers, booleans and
    mappings read alike; YAML alone would keep 2e-5 a string)."""
    return _seen(config, passthrough.passed_values(extra, passthrough.receiver(recipe.name)))


def _seen(config: Mapping[str, Any], passed: Mapping[str, str | list[str]]) -> dict[str, Any]:
    def read(raw: str | list[str]) -> Any:
        return [_value(word) for word in raw] if isinstance(raw, list) else _value(raw)

    return {**config, **{key: read(raw) for key, raw in passed.items()}}


def _value(raw: str) -> Any:
    import yaml

    try:
        return json.loads(raw)
    except ValueError:
        pass
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def render(config: Mapping[str, Any], source: str) -> str:
    import yaml

    header = f"# Written by `train` from {source}; edit that file (or pass flags), not this copy.\n"
    return header + yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False)


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
    "report_to": "trackio",  # recorded in the output folder, never sent anywhere (run/tracking.py)
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
    settings: TrainSettings,
    user_config: Mapping[str, Any],
    recipe: Recipe,
    source: str,
    script: passthrough.ScriptArgs,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config that says what the run is, and the same as the recipe's script will see it (the values
    given after `--` over the file's, for what is weighed on them): the user's, checked against the recipe
    (`script`: the arguments after `--` as passthrough.script_args checked them, and the keys the script
    accepts), with --model, --dataset, --reward-model and --output-dir applied, and the smoke run's keys with
    --cpu (not yet train's choices for the machine); UsageError naming unknown keys and what is missing."""
    check_keys(user_config, recipe, source, script.accepted)
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
    check_required(config, recipe, source)
    if recipe.server_only:
        _check_tree_attention(config, source)
    if settings.cpu:
        config.update(SMOKE, **SMOKE_BY_RECIPE[recipe.name])
    config["output_dir"] = settings.output_dir or config.get("output_dir") or f"outputs/{recipe.name}"
    return config, _seen(config, script.passed)


def check_paths(config: Mapping[str, Any], settings: TrainSettings, recipe: Recipe, source: str) -> None:
    """Every local path the run trains with (its model, dataset and reward model) exists here: one that does
    not is refused before anything starts, previews included, named as it was given."""
    given = {
        "model_name_or_path": (settings.model, f"--model ({Env.MODEL})"),
        "dataset_name": (settings.dataset, f"--dataset ({Env.DATASET})"),
    }
    if recipe.reward_model_key:
        given[recipe.reward_model_key] = (settings.reward_model, f"--reward-model ({Env.REWARD_MODEL})")
    for key, (flag_value, flag) in given.items():
        value = config.get(key)
        if isinstance(value, str):
            check_local_path(value, flag if flag_value else f"{key} in {source}")


def _check_tree_attention(config: Mapping[str, Any], source: str) -> None:
    """async-grpo's trainer always uses tree-packing attention: another implementation cannot be set."""
    init_kwargs = config.get("model_init_kwargs")
    if isinstance(init_kwargs, Mapping) and "attn_implementation" in init_kwargs:
        raise UsageError(
            f"{source}: model_init_kwargs.attn_implementation cannot be set for async-grpo: TRL's "
            "AsyncGRPOTrainer always uses tree-packing attention. Remove it; tree_attention_kernel (auto, "
            "hub, fa4, sdpa) chooses the kernel that serves it."
        )
