"""This task's reward functions. config.yaml names them by import path (`rewards.correct_answer`): the task
folder is first on the trainer's PYTHONPATH.

The trainer calls each one once per batch, with keyword arguments:

    prompts       the prompts, one per completion (here: chat messages, as data.jsonl holds them)
    completions   the completions (here: a list holding one assistant message each)
    answer        every other column of the data, by name: one value per completion
    **kwargs      what else the trainer passes (completion_ids, trainer_state, ...): take it and ignore it

and wants back one float per completion, or None for one the function cannot score (the trainer leaves it
out of that function's mean). `trlstack check-task FOLDER` calls them on rows of data.jsonl before training.
"""

from __future__ import annotations

import re
from typing import Any

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def text(completion: Any) -> str:
    """A completion as text: chat data gives a list of messages, plain-text data a string."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def correct_answer(
    prompts: list[Any], completions: list[Any], answer: list[Any], **kwargs: Any
) -> list[float | None]:
    """1.0 where the last number in the completion is the row's `answer`, else 0.0; None where the row has
    no answer."""
    scores: list[float | None] = []
    for completion, expected in zip(completions, answer, strict=True):
        if expected is None:
            scores.append(None)
            continue
        numbers = NUMBER.findall(text(completion))
        scores.append(1.0 if numbers and float(numbers[-1]) == float(expected) else 0.0)
    return scores


def brevity(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """Up to 1.0 for a short completion, less the longer it is, none past 400 characters: arithmetic needs
    no essay. Completions differ in length from the first step, so even an untrained model earns it in
    different amounts, which gives the first steps something to learn from."""
    return [max(0.0, 1.0 - len(text(completion)) / 400) for completion in completions]
