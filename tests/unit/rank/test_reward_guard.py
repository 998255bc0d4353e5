"""rank/reward_guard.py, the parts that need no torch: a raising reward recorded with its line, step and row
(the batch scored 0 so that every process reaches the next collective), sync or async; async-grpo's picklable
wrapper naming the same, and that text found again in the error the trainer raises. The whole path, a real
run ending with the last step's checkpoint saved, runs in the image (tests/image/test_image_task.py)."""

from __future__ import annotations

import asyncio
import pickle

import pytest
from trlstack.rank import reward_guard


@pytest.fixture(autouse=True)
def no_failures():
    reward_guard.FAILURES.clear()
    yield
    reward_guard.FAILURES.clear()


def first_char(completions, answer, **kwargs):
    return [float(ord(text[0])) for text in completions]  # raises on an empty completion


async def first_char_async(completions, answer, **kwargs):
    return first_char(completions, answer)


KWARGS = {"prompts": ["p0", "p1"], "completions": ["ok", ""], "answer": [5, 6], "trainer_state": object()}


@pytest.mark.parametrize("func", [first_char, first_char_async])
def test_a_raise_is_recorded_with_its_line_step_and_row_and_the_batch_scored_zero(func):
    guarded = reward_guard.guarded(func, lambda: 3)
    result = guarded(**KWARGS)
    result = asyncio.run(result) if asyncio.iscoroutine(result) else result
    assert result == [0.0, 0.0]
    (failure,) = reward_guard.FAILURES
    line = first_char.__code__.co_firstlineno + 1
    assert failure.text() == (
        f"reward {func.__name__} raised IndexError: string index out of range "
        f"(test_reward_guard.py:{line}) at step 3 on prompt 'p1', answer=6, completion ''"
    )


def test_a_guarded_reward_keeps_its_name_and_asyncness_for_trl():
    assert reward_guard.guarded(first_char, lambda: 1).__name__ == "first_char"
    assert asyncio.iscoroutinefunction(reward_guard.guarded(first_char_async, lambda: 1))
    assert reward_guard.guarded(first_char, lambda: 1)(**{**KWARGS, "completions": ["a", "b"]}) == [
        97.0,
        98.0,
    ]
    assert reward_guard.FAILURES == []


def test_async_grpo_s_wrapper_pickles_and_names_the_failing_row():
    (wrapped,) = reward_guard.picklable([first_char])
    again = pickle.loads(pickle.dumps(wrapped))
    assert again.__name__ == "first_char"
    with pytest.raises(reward_guard.RewardFailed) as error:
        again(**KWARGS)
    assert "reward first_char raised IndexError" in str(error.value)
    assert "on prompt 'p1', answer=6, completion ''" in str(error.value)
    assert pickle.loads(pickle.dumps(error.value)).args == error.value.args


def test_the_worker_s_failure_is_found_in_the_error_the_trainer_raises():
    # TRL's AsyncRolloutWorker.check_health: RuntimeError(...) from RuntimeError(f"{type}: {msg}\n{tb}")
    cause = RuntimeError(
        "RewardFailed: reward r raised KeyError: 'x' (rewards.py:3) on prompt 'p'\nTraceback ..."
    )
    try:
        raise RuntimeError("Rollout worker child has failed; see chained exception.") from cause
    except RuntimeError as error:
        found = reward_guard.reward_failed(error)
    assert found == "reward r raised KeyError: 'x' (rewards.py:3) on prompt 'p'"
    assert reward_guard.reward_failed(ValueError("something else")) is None
