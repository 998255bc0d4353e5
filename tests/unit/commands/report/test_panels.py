"""What the report shows of a run (report/panels.py), decided from its metrics alone: each panel's series by
the trainers' metric names, a note where a panel has nothing, and the terminal summary's lines."""

from __future__ import annotations

import re

from trlstack.commands.report import panels
from trlstack.metrics import Run, find_stores, read_runs

from .recorded import recorded_run


def run_of(*rows: dict, **config) -> Run:
    """A run of `rows`, logged at steps 1, 2, ... as the trainer logs them."""
    return Run(
        "r", [{**row, "_step": step, "train/global_step": step} for step, row in enumerate(rows, 1)], config
    )


def test_the_panels_hold_every_reward_function_and_the_split(tmp_path):
    (run,) = read_runs(find_stores(recorded_run(tmp_path / "grpo"))[0])
    reward, loss, kl, length, split, throughput = panels.panels(run)
    assert list(reward.lines) == ["total", "accuracy_reward", "format_reward"]
    assert loss.lines["loss"][-1] == (4.0, 0.025)
    assert kl.lines == {} and "beta > 0" in kl.note
    assert length.lines["completions/mean_length"][0] == (1.0, 101.0)
    assert list(split.lines) == ["generation", "weight push", "forward + backward", "optimizer", "other"]
    assert split.stacked and throughput.right == "completions/s"


def test_each_trainers_reward_names_give_one_line_a_function_and_their_spreads_none():
    run = run_of(
        {"rewards/accuracy_reward/mean": 0.5, "rewards/accuracy_reward/std": 0.2},  # GRPO, RLOO
        {"rewards/correct_answer": 1.0},  # async-grpo
        {"rewards/chosen": 0.25},  # online DPO
    )
    assert panels.reward_panel(run).lines == {
        "accuracy_reward": [(1.0, 0.5)],
        "chosen": [(3.0, 0.25)],
        "correct_answer": [(2.0, 1.0)],
    }


def test_the_kl_panel_takes_online_dpos_name_where_grpos_is_missing():
    kl = panels.panels(run_of({"objective/kl": 0.1}))[2]
    assert kl.lines == {"objective/kl": [(1.0, 0.1)]} and kl.note == ""


def test_a_run_that_logged_nothing_yet_has_a_note_in_every_panel():
    found = panels.panels(run_of({"epoch": 0.0}))
    assert [panel.title for panel in found] == [
        "reward per function", "loss", "KL to the reference", "completion length",
        "where each step's time goes", "throughput",
    ]  # fmt: skip
    assert all(panel.lines == {} and panel.note for panel in found)


def test_a_part_of_the_step_that_never_took_time_is_left_out_of_the_split():
    split = panels.split_panel(run_of({"time/generation_s": 2.0, "time/wait_s": 0.0}))
    assert list(split.lines) == ["generation"]


def test_the_summary_of_a_run_without_the_step_split_or_memory_says_so():
    lines = panels.summary(run_of({"loss": 0.5}, {"loss": 0.25}, model_name_or_path="org/m"), "out/r")
    assert lines[0] == "run r (out/r): org/m, step 2"  # no max_steps in the config: no "of N"
    rows = dict(re.fullmatch(r"  (.+?)  +(.+)", line).groups() for line in lines[1:])
    assert rows == {
        "loss": "0.25",
        "KL to the reference": "KL not logged (GRPO logs it with beta > 0)",
        "completion length": "no completion length logged",
        "step": "no step split logged",
        "throughput": "not logged",
    }  # no reward, GPU memory or vLLM server logged: no line for them


def test_the_step_line_gives_each_parts_mean_and_share_of_the_mean_step():
    run = run_of(
        {"time/step_s": 10.0, "time/generation_s": 4.0, "time/other_s": 1.0},
        {"time/step_s": 30.0, "time/generation_s": 16.0, "time/other_s": 1.0},
    )
    assert panels.split_line(run) == "20 s: generation 10 s (50%), other 1 s (5%)"
    assert panels.split_line(run_of({"loss": 1.0})) is None
