"""rank/step_split.py: the parts of a step add up to its wall time, nested parts are counted once, and the
progress line says where the run is."""

from __future__ import annotations

import pytest
from trlstack.rank import step_split
from trlstack.rank.step_split import Split


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_parts_and_other_add_up_to_the_step():
    clock = Clock()
    split = Split(clock=clock)
    split.start()
    clock.now += 0.5  # waiting for the batch, untimed: other
    with split.timed("time/generation_s"):
        clock.now += 2.0
        with split.timed("time/weight_push_s"):  # inside generation: counted once, as a push
            clock.now += 1.0
    with split.timed("time/forward_backward_s"):
        clock.now += 3.0
    split.add("time/optimizer_s", 0.5)
    clock.now += 0.5
    split.end_step()
    (step,) = split.steps
    assert step["time/step_s"] == 7.0
    assert step["time/generation_s"] == 2.0 and step["time/weight_push_s"] == 1.0
    assert step["time/forward_backward_s"] == 3.0 and step["time/optimizer_s"] == 0.5
    assert step["time/other_s"] == 0.5
    parts = sum(value for key, value in step.items() if key != "time/step_s")
    assert parts == pytest.approx(step["time/step_s"])


def test_the_summary_is_the_mean_over_the_interval_and_starts_a_new_one():
    clock = Clock()
    split = Split(clock=clock)
    split.start()
    for seconds in (1.0, 3.0):
        with split.timed("time/generation_s"):
            clock.now += seconds
        split.end_step()
    means = split.summary()
    assert means["time/step_s"] == 2.0 and means["time/generation_s"] == 2.0
    assert means["time/wait_s"] == 0.0
    assert split.summary() == {}


def test_a_part_that_raises_is_still_counted():
    clock = Clock()
    split = Split(clock=clock)
    with pytest.raises(RuntimeError), split.timed("time/weight_push_s"):
        clock.now += 4.0
        raise RuntimeError("push failed")
    assert split.current == {"time/weight_push_s": 4.0}


def test_tokens_per_step_prefers_the_trainers_own_count():
    logs = {"completions/mean_length": 100.0, "batch/trained_tokens_per_step": 900.0}
    assert step_split.tokens_per_step(logs, 32, counted=6400.0, steps=2) == 3200.0
    assert step_split.tokens_per_step(logs, 32, counted=None, steps=2) == 900.0
    assert step_split.tokens_per_step({"completions/mean_length": 100.0}, 32, None, 2) == 3200.0
    assert step_split.tokens_per_step({}, 32, None, 2) is None


def test_throughput_per_second_of_step():
    assert step_split.throughput(2.0, 32, 3200.0) == {
        "throughput/completions_per_s": 16.0,
        "throughput/tokens_per_s": 1600.0,
    }
    assert step_split.throughput(2.0, 32, None) == {"throughput/completions_per_s": 16.0}


def test_the_progress_line_says_step_of_steps_elapsed_eta_and_reward():
    line = step_split.progress_line(20, 1000, 3725.0, 15.5, {"reward": 0.41234, "loss": 0.1})
    assert line == "step 20 of 1000 (2.0%), elapsed 1:02:05, ETA 4:13:10, 15.5 s/step, reward 0.4123"


def test_online_dpo_shows_its_rlhf_reward():
    line = step_split.progress_line(1, 2, 1.0, None, {"objective/rlhf_reward": -1.5})
    assert line == "step 1 of 2 (50.0%), elapsed 0:00:01, objective/rlhf_reward -1.5"
