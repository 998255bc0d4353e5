"""The training recipes `train` runs: TRL's own GRPO and RLOO scripts, and our Online DPO script.

Each recipe has a bundled YAML in TRL's config format beside this file, and the set of keys its script's
dataclasses accept (keys.json, read without importing TRL, which takes seconds and pulls in torch).
`python -m trlstack.recipes` regenerates keys.json from the installed TRL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

HERE = Path(__file__).parent
KEYS_FILE = HERE / "keys.json"

# Every recipe's script runs through this module: a stop signal then ends it with a checkpoint (run.py).
RUNNER = "trlstack.recipes.run"

# TrlParser reads this key itself: environment variables to set before training.
PARSER_KEYS = frozenset({"env"})


@dataclass(frozen=True)
class Recipe:
    name: str
    yaml: str  # bundled config file name
    module: str  # run as `accelerate launch -m MODULE --config YAML`
    dataclasses: tuple[str, ...]  # "module:Class" whose fields are the config keys
    reward_keys: tuple[str, ...]  # at least one must be set: something must judge the completions
    reward_model_key: str  # where `train --reward-model` puts a reward model

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
        module="trlstack.recipes.online_dpo",
        dataclasses=(
            "trlstack.recipes.online_dpo:OnlineDPOScriptArguments",
            "trl.experimental.online_dpo:OnlineDPOConfig",
            *_COMMON,
        ),
        reward_keys=("reward_model_path", "reward_funcs"),
        reward_model_key="reward_model_path",
    ),
}


@cache
def accepted_keys(recipe: str) -> frozenset[str]:
    """The config keys the recipe's script accepts (its dataclasses' fields), from keys.json."""
    table = json.loads(KEYS_FILE.read_text())
    return frozenset(table[recipe]) | PARSER_KEYS


def keys_from_trl(recipe: str) -> list[str]:
    """The same keys read from the installed TRL's dataclasses (imports TRL and torch)."""
    import dataclasses
    import importlib

    names: set[str] = set()
    for path in RECIPES[recipe].dataclasses:
        module, cls = path.split(":")
        names |= {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls)) if f.init}
    return sorted(names)


def write_keys_file(path: Path = KEYS_FILE) -> None:
    path.write_text(json.dumps({name: keys_from_trl(name) for name in RECIPES}, indent=1) + "\n")
