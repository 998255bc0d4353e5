"""The task scaffold's reward functions (templates/rewards.py): each scores what its docstring says, in
TRL's signature, for chat and plain-text completions; and the scaffold's data holds the answers the first one
checks."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from trlstack.commands.init.templates import rewards

QUESTION = re.compile(r"What is (\d+) ([-+*]) (\d+)\? End your answer with the number alone\.")


def said(text: str) -> list[dict[str, str]]:
    """A chat completion as the trainer passes it: a list holding one assistant message."""
    return [{"role": "assistant", "content": text}]


def test_correct_answer_scores_the_last_number_against_the_rows_answer():
    completions = [said("26 + 28 = 54"), said("54, or maybe 55"), "The answer is 6.0", said("no number"), "7"]
    scores = rewards.correct_answer(prompts=[None] * 5, completions=completions, answer=[54, 54, 6, 3, None])
    assert scores == [1.0, 0.0, 1.0, 0.0, None]  # the last number counts; no answer: not scored


def test_correct_answer_takes_what_else_the_trainer_passes_and_needs_one_answer_a_completion():
    assert rewards.correct_answer([None], ["-16"], [-16], completion_ids=[[1]], trainer_state=None) == [1.0]
    with pytest.raises(ValueError):
        rewards.correct_answer([None, None], ["1", "2"], [1])


def test_brevity_is_one_for_nothing_and_falls_to_zero_at_400_characters():
    completions = ["", "x" * 100, said("x" * 200), "x" * 400, "x" * 1000]
    assert rewards.brevity(completions) == [1.0, 0.75, 0.5, 0.0, 0.0]


def test_each_row_of_the_scaffolds_data_is_scored_one_for_its_own_answer_and_zero_for_another():
    text = resources.files("trlstack.commands.init.templates").joinpath("data.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 64 and all(isinstance(row["answer"], int) for row in rows)
    for row in rows:
        asked = QUESTION.fullmatch(row["prompt"][0]["content"])
        assert asked, row
        left, sign, right = int(asked[1]), asked[2], int(asked[3])
        assert row["answer"] == {"+": left + right, "-": left - right, "*": left * right}[sign], row
    prompts = [row["prompt"] for row in rows]
    answers = [row["answer"] for row in rows]
    right = rewards.correct_answer(prompts, [said(f"So: {a}") for a in answers], answers)
    wrong = rewards.correct_answer(prompts, [said(f"So: {a + 1}") for a in answers], answers)
    assert (set(right), set(wrong)) == ({1.0}, {0.0})
