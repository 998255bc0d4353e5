"""The training recipes `train` runs, declared: TRL's own GRPO and RLOO scripts, and our Online DPO and
asynchronous GRPO scripts.

Each recipe has a bundled YAML in TRL's config format beside this file. The keys its script accepts are the
`dest`s of its parser's options (`run.passthrough.accepted_keys`, from run/parsers.json, without importing
TRL, which takes seconds and pulls in torch); `python -m trlstack.run.passthrough` regenerates that table from
the installed TRL. The scripts themselves, and what runs beside them in each rank, are in rank/. This package
imports nothing of trlstack but the variables' names (defaults.py) and the error a user's mistake raises
(errors.py): what reads the recipes sits above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from trlstack.defaults import Env
from trlstack.errors import UsageError

# Every recipe's script runs through this module: a stop signal then ends it with a checkpoint (run.py).
RUNNER = "trlstack.rank.run"

# TrlParser reads this key itself: environment variables to set before training.
PARSER_KEYS = frozenset({"env"})
# Options of the script's parser that are no config key: --help, and --config (the file itself).
NOT_FIELDS = frozenset({"help", "config"})


# Every trainer passes these to a reward function (GRPOTrainer._calculate_rewards and its kin, trl 1.16).
_REWARD_KWARGS = ("prompts", "completions", "completion_ids")


@dataclass(frozen=True)
class Recipe:
    name: str
    yaml: str  # bundled config file name
    module: str  # run as `accelerate launch -m MODULE --config YAML`
    dataclasses: tuple[str, ...]  # "module:Class" whose fields are the config keys
    reward_keys: tuple[str, ...]  # at least one must be set: something must judge the completions
    reward_model_key: str | None  # where `train --reward-model` puts a reward model (None: it takes none)
    server_only: bool = False  # generates only through a vLLM server: no colocate, no --cpu
    # The keywords the trainer calls a reward function with besides the dataset's columns, and the columns
    # it does not pass on (trlstack check-task holds a task's rewards to both).
    reward_kwargs: tuple[str, ...] = (*_REWARD_KWARGS, "trainer_state", "log_extra", "log_metric")
    columns_not_passed: tuple[str, ...] = ("prompt", "completion", "completion_ids")
    columns: tuple[str, ...] = ("prompt",)  # the dataset columns the trainer reads itself

    @property
    def bundled_config(self) -> Path:
        return Path(str(resources.files(__package__).joinpath(self.yaml)))

    def describe_dataclasses(self) -> str:
        return ", ".join(path.rsplit(":", 1)[1] for path in self.dataclasses)


_COMMON = ("trl:ModelConfig", "trl:DatasetMixtureConfig")


def _trl_script(name: str) -> Recipe:
    """One of TRL's own scripts, trl/scripts/NAME.py, with its NAMEScriptArguments and trl.NAMEConfig."""
    module = f"trl.scripts.{name}"
    return Recipe(
        name=name,
        yaml=f"{name}.yaml",
        module=module,
        dataclasses=(f"{module}:{name.upper()}ScriptArguments", f"trl:{name.upper()}Config", *_COMMON),
        reward_keys=("reward_funcs", "reward_model_name_or_path"),
        reward_model_key="reward_model_name_or_path",
    )


RECIPES: dict[str, Recipe] = {
    "grpo": _trl_script("grpo"),
    "rloo": _trl_script("rloo"),
    "online-dpo": Recipe(
        name="online-dpo",
        yaml="online_dpo.yaml",
        module="trlstack.rank.online_dpo",
        dataclasses=(
            "trlstack.rank.online_dpo:OnlineDPOScriptArguments",
            "trl.experimental.online_dpo:OnlineDPOConfig",
            *_COMMON,
        ),
        reward_keys=("reward_model_path", "reward_funcs"),
        reward_model_key="reward_model_path",
        # OnlineDPOTrainer._calculate_rewards_from_functions: no loggers; every column but prompt
        reward_kwargs=(*_REWARD_KWARGS, "trainer_state"),
        columns_not_passed=("prompt",),
    ),
    # TRL's AsyncGRPOTrainer: generation on the server overlaps training (async_grpo.py). Its rewards are
    # scored in a rollout process without a GPU: functions only, no reward model.
    "async-grpo": Recipe(
        name="async-grpo",
        yaml="async_grpo.yaml",
        module="trlstack.rank.async_grpo",
        dataclasses=(
            "trlstack.rank.async_grpo:AsyncGRPOScriptArguments",
            "trl.experimental.async_grpo:AsyncGRPOConfig",
            "trl:DatasetMixtureConfig",
        ),
        reward_keys=("reward_funcs",),
        reward_model_key=None,
        server_only=True,
        reward_kwargs=_REWARD_KWARGS,  # the rollout worker's _score_group: no trainer state, no loggers
    ),
}


def resolve_recipe(name: str | None) -> Recipe:
    """The recipe `name` names; UsageError naming the choices for none or an unknown one."""
    choices = ", ".join(RECIPES)
    if not name:
        raise UsageError(f"name a recipe: train RECIPE, one of {choices} (or set {Env.RECIPE}).")
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; choose one of {choices}.")
    return RECIPES[name]


def keys_from_trl(recipe: str) -> list[str]:
    """The same keys read from the installed TRL's dataclasses (imports TRL and torch)."""
    import dataclasses
    import importlib

    names: set[str] = set()
    for path in RECIPES[recipe].dataclasses:
        module, cls = path.split(":")
        names |= {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls)) if f.init}
    return sorted(names)
