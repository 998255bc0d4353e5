"""rank/rewards.py: the reward functions a recipe's config names, resolved as TRL's own GRPO script resolves
them: TRL's built-in names (the overlong punishment sized from the completion length), or an import path
found from the working folder; any other name refused naming the choices."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")

from trl import rewards as trl_rewards  # noqa: E402
from trlstack.rank.rewards import named_reward_funcs  # noqa: E402


def test_trls_names_give_trls_functions_in_the_order_named():
    names = ["think_format_reward", "accuracy_reward", "reasoning_accuracy_reward"]
    assert named_reward_funcs(names, 256) == [
        trl_rewards.think_format_reward,
        trl_rewards.accuracy_reward,
        trl_rewards.reasoning_accuracy_reward,
    ]
    assert named_reward_funcs([], 256) == []


def test_the_overlong_punishment_starts_a_quarter_of_the_length_before_its_end():
    (punish,) = named_reward_funcs(["get_soft_overlong_punishment"], 16)
    lengths = [12, 14, 16, 17]  # the soft zone is the last 4 of 16 tokens
    assert punish(completion_ids=[[0] * n for n in lengths]) == [0.0, -0.5, -1.0, -1.0]


def test_an_import_path_is_found_from_the_working_folder(tmp_path, monkeypatch):
    (tmp_path / "task_rewards_here.py").write_text("def score(completions, **kwargs):\n    return [2.0]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "task_rewards_here", raising=False)
    (score,) = named_reward_funcs(["task_rewards_here.score"], 16)
    assert score(completions=["x"]) == [2.0]


def test_a_name_that_is_neither_is_refused_naming_the_choices():
    with pytest.raises(ValueError) as error:
        named_reward_funcs(["think_format_reward", "brevity"], 16)
    assert str(error.value) == (
        "Could not load reward function 'brevity'. Expected one of ['accuracy_reward', "
        "'reasoning_accuracy_reward', 'think_format_reward', 'get_soft_overlong_punishment'] or an import "
        "path."
    )
