"""reward_calls.py: one reward call judged and told, as check-task and a training rank both tell it."""

from __future__ import annotations

import asyncio

import pytest
from trlstack import reward_calls


class Scalar:
    """A number as torch and numpy give one: not a float, but float() takes it."""

    def __float__(self) -> float:
        return 0.5


@pytest.mark.parametrize("result", [[1.0, None, 0], (True, 2.5, None), [Scalar(), Scalar(), 1.0]])
def test_one_number_or_none_per_completion_is_what_the_trainers_take(result):
    assert reward_calls.scores_problem(result, 3) is None


@pytest.mark.parametrize(
    ("result", "words"),
    [
        (None, "returned None, not a list"),
        ({"a": 1.0}, "returned a dict, not a list"),
        ([1.0], "returned 1 values for 3 completions"),
        ([1.0, float("inf"), 0.0], "returned inf for completion 1: return None"),
        ([1.0, object(), 0.0], "returned a object for completion 1: give a float"),
    ],
)
def test_anything_else_is_named(result, words):
    assert words in reward_calls.scores_problem(result, 3)


def test_the_row_a_reward_fails_on_is_found_by_calling_it_on_each_row_alone():
    def picky(prompts, completions, answer, **kwargs):
        return [1.0 / len(c) for c in completions]

    kwargs = {
        "prompts": ["p0", "p1", "p2"],
        "completions": ["ab", "", "c"],
        "answer": [1, 2, 3],
        "flag": True,
    }
    assert reward_calls.failing_row(picky, kwargs, 3) == 1
    assert reward_calls.describe_row(kwargs, 1) == "prompt 'p1', answer=2, completion ''"


def test_an_async_reward_is_awaited_also_from_inside_a_running_loop():
    async def score(**kwargs):
        return [1.0]

    assert reward_calls.resolved(score()) == [1.0]
    assert asyncio.run(asyncio.to_thread(lambda: reward_calls.resolved(score()))) == [1.0]

    async def inside():
        return reward_calls.resolved(score())

    assert asyncio.run(inside()) == [1.0]


def test_the_raise_site_is_the_deepest_line_in_the_reward_s_own_folder(tmp_path):
    import importlib.util
    import sys

    (tmp_path / "helpers.py").write_text("def parse(text):\n    return int(text)\n")
    (tmp_path / "mine.py").write_text(
        "import helpers\n\n\ndef reward(completions, **kw):\n"
        "    return [helpers.parse(c) for c in completions]\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location("mine", tmp_path / "mine.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with pytest.raises(ValueError) as error:
            module.reward(["x"])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helpers", None)
    assert reward_calls.raise_site(error.value, module.reward, tmp_path) == "helpers.py:2"
