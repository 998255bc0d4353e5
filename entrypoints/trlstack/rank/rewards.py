"""Reward functions named in a recipe's config, as TRL's own GRPO script resolves them: a built-in name of
trl.rewards, or an import path (`my_lib.rewards.custom_reward`, found from the working folder too)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Any


def named_reward_funcs(names: Iterable[str], max_completion_len: int) -> list[Any]:
    """The functions `names` name, in order; ValueError naming the choices for a name that is neither."""
    from trl.rewards import (
        accuracy_reward,
        get_soft_overlong_punishment,
        reasoning_accuracy_reward,
        think_format_reward,
    )

    registry = {
        "accuracy_reward": accuracy_reward,
        "reasoning_accuracy_reward": reasoning_accuracy_reward,
        "think_format_reward": think_format_reward,
        "get_soft_overlong_punishment": get_soft_overlong_punishment(
            max_completion_len=max_completion_len, soft_punish_cache=max_completion_len // 4
        ),
    }
    found: list[Any] = []
    for name in names:
        if name in registry:
            found.append(registry[name])
        elif "." in name:
            module_path, func_name = name.rsplit(".", 1)
            sys.path.insert(0, os.getcwd())
            found.append(getattr(importlib.import_module(module_path), func_name))
        else:
            raise ValueError(
                f"Could not load reward function {name!r}. Expected one of {list(registry)} or an import "
                "path."
            )
    return found
