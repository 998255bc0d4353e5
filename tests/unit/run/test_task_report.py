"""run/task_report.py: what the task check's steps share: a Problem says where, what and the fix in one line,
and a Report passes saying what it checked, or lists every problem and says that nothing was started."""

from __future__ import annotations

from pathlib import Path

from trlstack.recipes import RECIPES
from trlstack.run.task_report import ROWS, Problem, Report, Rows, Task


def test_a_problem_reads_where_what_then_the_fix():
    problem = Problem("rewards.py:7", "reward rewards.odd returned 1.0", "return one float per completion")
    assert str(problem) == "rewards.py:7: reward rewards.odd returned 1.0; return one float per completion."


def test_a_report_without_problems_passes_saying_what_it_checked_and_how_fast():
    report = Report(checked=["keys of config.yaml", "2 rows of data.jsonl"], seconds=0.123)
    assert report.text("task t") == "task t: passed in 0.12 s: keys of config.yaml; 2 rows of data.jsonl"


def test_a_report_with_problems_lists_each_with_its_fix_and_says_nothing_was_started():
    report = Report([Problem("config.yaml", "no model", "add it"), Problem("data.jsonl", "empty", "fill it")])
    report.checked.append("what passed is not said")
    assert report.text("task t") == (
        "task t: 2 problem(s), nothing was started:\n  - config.yaml: no model; add it.\n"
        "  - data.jsonl: empty; fill it."
    )


def test_a_new_report_has_read_no_rows_and_each_task_check_calls_rewards_on_two():
    assert Report().rows == Rows(None, None) and Report().problems == [] and Report().checked == []
    a, b = Report(), Report()
    a.problems.append(Problem("x", "y", "z"))
    assert b.problems == []  # each report its own lists
    task = Task({}, RECIPES["grpo"], "config.yaml", Path("."))
    assert task.row_count == ROWS == 2
