"""run/task_check.py: a task checked in seconds. The scaffold `trlstack init` writes passes for every recipe;
each way a task breaks is refused, naming the file (and the line, for a raise), the function or column, and
the fix."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from trlstack.commands import init
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.run import task_check, trl_config

GRPO = RECIPES["grpo"]


def scaffold(root: Path, recipe: str = "grpo") -> Path:
    root.mkdir(parents=True)
    for name, text in init.contents(recipe, root).items():
        (root / name).write_text(text)
    return root


def check(root: Path, recipe: str = "grpo") -> task_check.Report:
    config = trl_config.load_config(root / "config.yaml")
    return task_check.check_task(config, RECIPES[recipe], root / "config.yaml", root)


def problems(root: Path, recipe: str = "grpo") -> list[str]:
    return [str(problem) for problem in check(root, recipe).problems]


def edit_config(root: Path, old: str, new: str) -> None:
    path = root / "config.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


def add_reward(root: Path, source: str, name: str) -> None:
    """Append a function to rewards.py and name it in the config's reward_funcs."""
    with (root / "rewards.py").open("a") as module:
        module.write("\n\n" + textwrap.dedent(source))
    edit_config(root, "  - rewards.brevity\n", f"  - rewards.brevity\n  - rewards.{name}\n")


def line_of(root: Path, text: str) -> int:
    lines = (root / "rewards.py").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


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


def test_a_column_a_reward_takes_by_name_must_be_in_the_data(tmp_path):
    root = scaffold(tmp_path / "t")
    add_reward(
        root, "def graded(completions, rubric, **kwargs):\n    return [0.0] * len(completions)\n", "graded"
    )
    (found,) = problems(root)
    assert found.startswith(
        f"rewards.py:{line_of(root, 'def graded')}: reward rewards.graded needs the column "
    )
    assert "rubric, which the data lacks (its columns: answer, prompt)" in found
    assert "add a column rubric to the data" in found


def test_a_reward_the_trainer_cannot_pass_its_other_columns_to_is_refused(tmp_path):
    root = scaffold(tmp_path / "t")
    add_reward(root, "def strict(prompts, completions):\n    return [0.0] * len(completions)\n", "strict")
    (found,) = problems(root)
    assert (
        "reward rewards.strict takes no **kwargs, but the grpo trainer also passes answer, completion_ids"
        in (found)
    )
    assert "add **kwargs to its parameters" in found


def test_a_module_that_does_not_import_is_named_with_its_line(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "judge.py").write_text(
        "import math\nimport not_a_package_anywhere\n\ndef score(**kw):\n    pass\n"
    )
    edit_config(root, "  - rewards.brevity\n", "  - rewards.brevity\n  - judge.score\n  - gone.score\n")
    found = problems(root)
    assert "judge.py:2: judge imports not_a_package_anywhere, which is not installed here" in found[0]
    assert "pip install not_a_package_anywhere" in found[0]
    assert (
        "config.yaml: reward_funcs: reward gone.score: no module gone; put gone.py in the task folder"
        in (found[1])
    )


def test_a_syntax_error_and_a_missing_function_are_named(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "broken.py").write_text("def score(**kw):\n    return [\n")
    edit_config(root, "  - rewards.brevity\n", "  - rewards.brevty\n  - broken.score\n")
    found = problems(root)
    assert found[0].startswith(
        "rewards.py: reward rewards.brevty: rewards has no function brevty; did you mean "
    )
    assert "rewards.brevity?" in found[0]
    assert found[1].startswith("broken.py:2: syntax error")


def test_a_reward_that_raises_is_named_with_the_line_and_the_row(tmp_path):
    root = scaffold(tmp_path / "t")
    source = """\
        def first_word(completions, **kwargs):
            return [float(len(text(c).split()[0])) for c in completions]
        """
    add_reward(root, source, "first_word")
    (found,) = problems(root)
    line = line_of(root, "return [float(len(text(c).split()[0]))")
    assert found.startswith(f"rewards.py:{line}: reward rewards.first_word raised IndexError: list index ")
    assert "on row 1 of data.jsonl (prompt 'What is 26 + 28? End your answer with the number alone.'" in found
    assert "answer=54, completion '')" in found  # the empty completion is the one it fails on
    assert "return None for a completion the function cannot score" in found


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("return [0.0]", "returned 1 values for 6 completions: give one per completion"),
        ("return [float('nan')] * len(completions)", "returned nan for completion 0: return None for a"),
        ("return 1.0", "returned a float, not a list of one float (or None) per completion"),
        ("return ['1'] * len(completions)", "returned '1' (text) for completion 0: give a float"),
    ],
)
def test_a_reward_must_return_one_finite_float_or_none_per_completion(tmp_path, body, words):
    root = scaffold(tmp_path / "t")
    add_reward(root, f"def odd(completions, **kwargs):\n    {body}\n", "odd")
    (found,) = problems(root)
    assert found.startswith(f"rewards.py:{line_of(root, 'def odd')}: reward rewards.odd {words}")


def test_a_missing_data_file_is_named_with_where_the_config_names_it(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "data.jsonl").unlink()
    (found,) = problems(root)
    assert found.startswith(
        "config.yaml: dataset_name: the data data.jsonl does not exist; put it in the task"
    )


def test_a_model_folder_without_a_tokenizer_is_refused(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}")
    (root / "model" / "model.safetensors").write_bytes(b"")
    edit_config(root, "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct", "model_name_or_path: model")
    (found,) = problems(root)
    assert found.startswith("model: no tokenizer (tokenizer.json or tokenizer_config.json); save it beside")


def test_required_keys_are_named(tmp_path):
    root = scaffold(tmp_path / "t")
    rewards = "reward_funcs:  # import paths: rewards.py in this folder; their scores add up\n"
    edit_config(root, rewards + "  - rewards.correct_answer\n  - rewards.brevity\n", "")
    (found,) = problems(root)
    assert "config.yaml: no reward_funcs or reward_model_name_or_path" in found


def test_the_trainers_differ_in_what_they_pass_a_reward(tmp_path):
    root = scaffold(tmp_path / "t", "async-grpo")
    source = "def staged(completions, trainer_state, **kwargs):\n    return [0.0] * len(completions)\n"
    add_reward(root, source, "staged")
    (found,) = problems(root, "async-grpo")
    assert "reward rewards.staged needs trainer_state, which the async-grpo trainer does not pass" in found
    assert not [found for found in problems(root, "grpo") if "staged" in found]  # GRPO's passes its state


def test_require_task_refuses_with_every_problem_and_starts_nothing(tmp_path):
    root = scaffold(tmp_path / "t")
    edit_config(root, "learning_rate:", "lerning_rate:")
    (root / "data.jsonl").unlink()
    config = trl_config.load_config(root / "config.yaml")
    with pytest.raises(UsageError) as error:
        task_check.require_task(config, GRPO, root / "config.yaml", root, "task t")
    assert str(error.value).startswith("task t: 2 problem(s), nothing was started:\n  - config.yaml: keys")


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
