"""The output folder: writable or a message naming the fix, and which run is already there."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.run.outputs import (
    RUN_DEFINING,
    aside_name,
    check_writable,
    differences,
    move_aside,
    previous_run,
    refusal,
)
from trlstack.run.passthrough import accepted_keys

RUN = {
    "model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct",
    "dataset_name": "trl-lib/DeepMath-103K",
    "reward_funcs": ["accuracy_reward"],
    "learning_rate": 1.0e-6,
    "max_steps": 100,
}


def leave_run(folder, config=RUN, recipe="grpo", step=10):
    """A folder as a run leaves it: its merged config and a checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"trlstack-{recipe}.yaml").write_text("# Written by `train`\n" + yaml.safe_dump(config))
    (folder / f"checkpoint-{step}").mkdir()
    (folder / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    return folder


def test_every_run_defining_key_is_a_key_some_recipe_accepts():
    accepted = set().union(*(accepted_keys(name) for name in RECIPES))
    assert set(RUN_DEFINING) <= accepted, set(RUN_DEFINING) - accepted


def test_no_folder_or_nothing_trained_means_no_previous_run(tmp_path):
    assert previous_run(tmp_path / "absent", "grpo") is None
    (tmp_path / "trlstack-grpo.yaml").write_text(yaml.safe_dump(RUN))  # stopped before training
    assert previous_run(tmp_path, "grpo") is None
    (tmp_path / "trlstack-grpo.yaml").unlink()
    (tmp_path / "checkpoint-3").mkdir()  # a run from before merged configs: nothing to compare with
    assert previous_run(tmp_path, "grpo") is None


def test_the_same_run_with_other_learning_rate_steps_or_saving_is_resumed(tmp_path):
    previous = previous_run(leave_run(tmp_path), "grpo")
    changed = {**RUN, "learning_rate": 3e-6, "max_steps": 500, "save_steps": 7, "bf16": True}
    assert differences(previous, "grpo", changed) == []


def test_another_model_dataset_or_recipe_is_another_run(tmp_path):
    previous = previous_run(leave_run(tmp_path), "grpo")
    other = {**RUN, "model_name_or_path": "Qwen/Qwen2.5-1.5B", "dataset_name": "/data/mine", "seed": 7}
    assert differences(previous, "grpo", other) == [
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct -> Qwen/Qwen2.5-1.5B",
        "dataset_name: trl-lib/DeepMath-103K -> /data/mine",
        "seed: (unset) -> 7",
    ]
    previous = previous_run(leave_run(tmp_path / "rloo-run", recipe="rloo"), "grpo")
    assert previous.recipe == "rloo"
    assert differences(previous, "grpo", RUN) == ["recipe: rloo -> grpo"]


def test_the_recipes_own_config_is_compared_first(tmp_path):
    leave_run(tmp_path, recipe="grpo")
    (tmp_path / "trlstack-rloo.yaml").write_text(yaml.safe_dump(RUN))  # left by an earlier, other recipe
    assert previous_run(tmp_path, "grpo").recipe == "grpo"


def test_an_unreadable_merged_config_is_an_unknown_run(tmp_path):
    leave_run(tmp_path)
    (tmp_path / "trlstack-grpo.yaml").write_text("- not a mapping\n")
    previous = previous_run(tmp_path, "grpo")
    assert differences(previous, "grpo", RUN) == [
        "trlstack-grpo.yaml cannot be read as a config, so what that run was is unknown"
    ]


def test_the_refusal_shows_the_difference_and_both_choices(tmp_path):
    folder = leave_run(tmp_path / "grpo")
    aside = aside_name(folder, datetime.datetime(2026, 3, 1, 9, 30, 5))
    found = differences(previous_run(folder, "grpo"), "grpo", {**RUN, "dataset_name": "/data/mine"})
    message = refusal(folder, previous_run(folder, "grpo"), found, aside)
    assert f"{folder} holds another run than this one (compared with its trlstack-grpo.yaml)" in message
    assert "    dataset_name: trl-lib/DeepMath-103K -> /data/mine\n" in message
    assert f"--fresh (TRLSTACK_FRESH=1): move it aside to {tmp_path}/grpo.20260301-093005" in message
    assert "--resume (TRLSTACK_RESUME=1): continue it anyway" in message


def test_moving_aside_keeps_everything_under_a_dated_name_never_taken(tmp_path):
    folder = leave_run(tmp_path / "grpo")
    when = datetime.datetime(2026, 3, 1, 9, 30, 5)
    (tmp_path / "grpo.20260301-093005").mkdir()  # taken: a number is added
    aside = aside_name(folder, when)
    assert aside == tmp_path / "grpo.20260301-093005-2"
    move_aside(folder, aside)
    assert not folder.exists()
    assert (aside / "checkpoint-10" / "trainer_state.json").is_file()


def test_a_folder_that_cannot_be_moved_is_named_with_the_fix(tmp_path):
    with pytest.raises(UsageError, match="Move or rename it yourself \\(nothing was deleted\\)"):
        move_aside(tmp_path / "absent", tmp_path / "absent.1")


def test_a_new_output_folder_under_a_writable_one_is_fine(tmp_path):
    check_writable(tmp_path / "outputs" / "grpo")  # train makes it


def test_a_file_where_the_folder_should_be_is_named(tmp_path):
    (tmp_path / "outputs").write_text("")
    with pytest.raises(UsageError, match=f"{tmp_path}/outputs is a file. Choose another --output-dir"):
        check_writable(tmp_path / "outputs" / "grpo")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere; tests/image has the uid-1000 case")
def test_a_folder_this_user_cannot_write_is_named_with_the_fix(tmp_path):
    outputs = tmp_path / "outputs"
    outputs.mkdir(mode=0o555)
    try:
        with pytest.raises(UsageError) as refused:
            check_writable(outputs / "grpo")
    finally:
        outputs.chmod(0o755)
    message = str(refused.value)
    assert f"cannot write the output folder {outputs}/grpo: {outputs} belongs to uid {os.getuid()}" in message
    assert "(mode dr-xr-xr-x)" in message and f"sudo chown -R {os.getuid()}:{os.getgid()} FOLDER" in message


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc on this system")
def test_an_output_folder_under_a_pseudo_file_system_is_refused_naming_it():
    with pytest.raises(
        UsageError, match=r"cannot make the output folder /proc/x: nothing can be made in /proc"
    ):
        check_writable(Path("/proc/x"))
