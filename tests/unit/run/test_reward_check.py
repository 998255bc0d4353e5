"""run/reward_check.py: a task's reward functions checked as the trainer will use them: imported by the name
the config gives (from the task folder first), held to the keywords the recipe's trainer passes, and called on
the data's first rows with stand-in completions; each finding names the file (and the line), the function,
and the fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from task_harness import add_reward, edit_config, line_of, problems, scaffold
from trlstack.recipes import RECIPES
from trlstack.run.reward_check import check_rewards
from trlstack.run.task_report import Report, Rows, Task


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


def test_the_trainers_differ_in_what_they_pass_a_reward(tmp_path):
    root = scaffold(tmp_path / "t", "async-grpo")
    source = "def staged(completions, trainer_state, **kwargs):\n    return [0.0] * len(completions)\n"
    add_reward(root, source, "staged")
    (found,) = problems(root, "async-grpo")
    assert "reward rewards.staged needs trainer_state, which the async-grpo trainer does not pass" in found
    assert not [found for found in problems(root, "grpo") if "staged" in found]  # GRPO's passes its state


ROWS = Rows([{"prompt": "What is 2 + 3?", "answer": 5}], {"prompt", "answer"}, "data.jsonl")


def checked(root: Path, names: list[str], rows: Rows = ROWS, recipe: str = "grpo") -> Report:
    report = Report(rows=rows)
    check_rewards(Task({"reward_funcs": names}, RECIPES[recipe], "config.yaml", root), report)
    return report


def test_a_name_that_is_neither_trls_nor_an_import_path_is_refused_naming_both(tmp_path):
    (problem,) = checked(tmp_path, ["brevity"]).problems
    assert str(problem) == (
        "config.yaml: reward_funcs: reward 'brevity' is neither one of TRL's rewards nor an import path; "
        "name one of TRL's (accuracy_reward, reasoning_accuracy_reward, think_format_reward, "
        "get_soft_overlong_punishment) or an import path such as rewards.my_reward."
    )


def test_trls_own_rewards_are_held_to_the_columns_they_read_without_importing_trl(tmp_path):
    (problem,) = checked(tmp_path, ["accuracy_reward", "think_format_reward"]).problems
    assert str(problem) == (
        "accuracy_reward: reward accuracy_reward needs the column solution, which the data lacks (its "
        "columns: answer, prompt); add a column solution to the data, or give the parameter a default."
    )
    with_solution = Rows([{"prompt": "p", "solution": "5"}], {"prompt", "solution"}, "data.jsonl")
    assert checked(tmp_path, ["accuracy_reward"], with_solution).problems == []


def test_a_parameter_taken_by_position_only_is_refused(tmp_path):
    (tmp_path / "mine.py").write_text(
        "def score(completions, /, **kwargs):\n    return [0.0] * len(completions)\n"
    )
    (problem,) = checked(tmp_path, ["mine.score"]).problems
    assert str(problem) == (
        "mine.py:1: reward mine.score takes completions by position only; the trainer passes every argument "
        "by keyword: drop the `/`."
    )


def test_rewards_are_imported_not_called_where_no_rows_are_read_here(tmp_path):
    (tmp_path / "mine.py").write_text("def score(completions, **kwargs):\n    raise ValueError\n")
    report = checked(tmp_path, ["mine.score"], Rows(None, None))
    assert report.problems == []
    assert report.checked == ["rewards mine.score imported, not called (no rows here)"]


def test_each_task_folder_is_imported_afresh_and_nothing_it_imported_stays(tmp_path):
    for name, body in (("a", "return [1.0] * len(completions)"), ("b", "raise KeyError('b')")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "rewards.py").write_text(f"def score(completions, **kwargs):\n    {body}\n")
    path, modules = list(sys.path), set(sys.modules)
    assert checked(tmp_path / "a", ["rewards.score"]).problems == []
    (problem,) = checked(tmp_path / "b", ["rewards.score"]).problems  # b's rewards, not a's
    assert problem.what.startswith("reward rewards.score raised KeyError: 'b' on row 1 of data.jsonl")
    assert (sys.path, set(sys.modules)) == (path, modules)
