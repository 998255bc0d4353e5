"""run/task_check.py: a task checked in seconds, its checks in order. The scaffold `trlstack init` writes
passes for every recipe; a config's keys and its data are refused naming the file, the key or column, and the
fix (the rewards' checks: run/test_reward_check.py; a model folder's: run/test_model_check.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from task_harness import add_reward, check, edit_config, problems, scaffold
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.run import task_check, trl_config

GRPO = RECIPES["grpo"]


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_the_scaffold_passes_for_its_recipe_calling_both_rewards(tmp_path, recipe):
    report = check(scaffold(tmp_path / "t", recipe), recipe)
    assert report.problems == []
    assert "2 called on 2 rows x 3 completions" in report.text("t")
    assert "columns answer, prompt" in report.text("t")


def test_an_unknown_key_is_named_with_its_close_match(tmp_path):
    root = scaffold(tmp_path / "t")
    edit_config(root, "learning_rate:", "lerning_rate:")
    (found,) = problems(root)
    assert found.startswith("config.yaml: keys the grpo script does not accept: lerning_rate (did you mean ")
    assert "learning_rate?)" in found and "or remove them" in found


def test_a_data_file_without_the_prompt_column_is_refused(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "data.jsonl").write_text(json.dumps({"question": "What is 2 + 3?", "answer": 5}) + "\n")
    found = problems(root)
    assert (
        "data.jsonl: no column prompt, which the grpo trainer reads (its columns: answer, question)"
        in (found[0])
    )
    assert "name the column of prompts `prompt`" in found[0]


def test_a_missing_data_file_is_named_with_where_the_config_names_it(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "data.jsonl").unlink()
    (found,) = problems(root)
    assert found.startswith(
        "config.yaml: dataset_name: the data data.jsonl does not exist; put it in the task"
    )


def test_required_keys_are_named(tmp_path):
    root = scaffold(tmp_path / "t")
    rewards = "reward_funcs:  # import paths: rewards.py in this folder; their scores add up\n"
    edit_config(root, rewards + "  - rewards.correct_answer\n  - rewards.brevity\n", "")
    (found,) = problems(root)
    assert "config.yaml: no reward_funcs or reward_model_name_or_path" in found


def test_require_task_refuses_with_every_problem_and_starts_nothing(tmp_path):
    root = scaffold(tmp_path / "t")
    edit_config(root, "learning_rate:", "lerning_rate:")
    (root / "data.jsonl").unlink()
    config = trl_config.load_config(root / "config.yaml")
    with pytest.raises(UsageError) as error:
        task_check.require_task(config, GRPO, root / "config.yaml", root, "task t")
    assert str(error.value).startswith("task t: 2 problem(s), nothing was started:\n  - config.yaml: keys")


def test_the_rewards_given_after_the_double_dash_are_the_ones_checked(tmp_path):
    # train and slurm check the config as the script sees it: `-- --reward_funcs X` replaces the file's
    root = scaffold(tmp_path / "t")
    add_reward(root, "def broken(completions, **kwargs):\n    raise ValueError('no')\n", "broken")
    config = trl_config.load_config(root / "config.yaml")
    with pytest.raises(UsageError, match="reward rewards.broken raised ValueError"):
        task_check.require_task(config, GRPO, root / "config.yaml", root, "task t")
    passed = ["--reward_funcs", "rewards.brevity", "--max_steps", "3"]
    task_check.require_task(config, GRPO, root / "config.yaml", root, "task t", passed)
    # every reward of a list given after `--` is checked, not only the first
    passed = ["--reward_funcs", "rewards.brevity", "rewards.broken", "--max_steps", "3"]
    with pytest.raises(UsageError, match="reward rewards.broken raised ValueError"):
        task_check.require_task(config, GRPO, root / "config.yaml", root, "task t", passed)


def test_the_scaffold_is_checked_in_well_under_10_s_without_torch_trl_or_datasets(tmp_path):
    root = scaffold(tmp_path / "t")
    probe = textwrap.dedent(
        f"""
        import sys, time
        started = time.monotonic()
        from trlstack.cli import main
        code = main(["check-task", {str(root)!r}])
        heavy = sorted(name for name in ("torch", "trl", "datasets", "transformers") if name in sys.modules)
        print(code, round(time.monotonic() - started, 2), heavy)
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    code, seconds, heavy = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert code == "0" and heavy == "[]", done.stdout
    assert float(seconds) < 10, f"the check took {seconds} s"
