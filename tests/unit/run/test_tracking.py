"""run/tracking.py: every run records its metrics with trackio in its output folder unless its config names
its own trackers; the run keeps its name across restarts, and nothing is sent anywhere."""

from __future__ import annotations

import pytest
from trlstack.recipes import RECIPES
from trlstack.run.tracking import trackers, tracking

GRPO = RECIPES["grpo"]


def test_without_report_to_the_run_records_to_trackio_in_its_output_folder():
    keys, env, notes = tracking({"output_dir": "/outputs/grpo"}, GRPO, "grpo.yaml")
    assert keys == {
        "report_to": "trackio",
        "project": "grpo",
        "run_name": "grpo",  # the output folder's: the same run when it resumes there
        "trackio_static_space_id": False,  # no Space made on a Hub push
    }
    assert env == {"TRACKIO_DIR": "/outputs/grpo/trackio"}
    (note,) = notes
    assert "/outputs/grpo/trackio" in note and "trlstack dashboard /outputs/grpo" in note


def test_the_run_is_named_after_its_folder_so_a_restart_continues_it():
    first, _, _ = tracking({"output_dir": "runs/exp-7"}, GRPO, "c.yaml")
    again, _, _ = tracking({"output_dir": "runs/exp-7", "resume_from_checkpoint": "x"}, GRPO, "c.yaml")
    assert first["run_name"] == again["run_name"] == "exp-7"


def test_the_configs_own_names_win():
    config = {"output_dir": "o", "report_to": "trackio", "project": "mine", "run_name": "r1"}
    keys, env, notes = tracking(config, GRPO, "c.yaml")
    assert keys == {"trackio_static_space_id": False}  # no Space: none made on a Hub push either
    assert env == {"TRACKIO_DIR": "o/trackio"}
    assert "project mine, run r1" in notes[0]


@pytest.mark.parametrize("report_to", ["wandb", ["wandb", "tensorboard"]])
def test_a_wandb_user_keeps_wandb(report_to):
    keys, env, notes = tracking({"output_dir": "o", "report_to": report_to}, GRPO, "c.yaml")
    assert (keys, env) == ({}, {})
    assert "metrics go to wandb" in notes[0] and "add trackio to report_to" in notes[0]


@pytest.mark.parametrize("report_to", [["trackio", "wandb"], "wandb,trackio", "all"])
def test_trackio_beside_other_trackers_is_recorded_locally_too(report_to):
    keys, env, _ = tracking({"output_dir": "o", "report_to": report_to}, GRPO, "c.yaml")
    assert env == {"TRACKIO_DIR": "o/trackio"}
    assert keys == {"project": "grpo", "run_name": "o", "trackio_static_space_id": False}


@pytest.mark.parametrize("report_to", ["none", [], None])
def test_none_records_nothing_and_says_so(report_to):
    keys, env, notes = tracking({"output_dir": "o", "report_to": report_to}, GRPO, "c.yaml")
    assert (keys, env) == ({}, {})
    assert "not recorded" in notes[0] and "report_to: trackio" in notes[0]


def test_report_to_is_read_in_each_spelling_trl_takes():
    assert trackers("trackio") == ["trackio"]
    assert trackers(" wandb , trackio ") == ["wandb", "trackio"]
    assert trackers(["tensorboard"]) == ["tensorboard"]
    assert trackers(None) == []


@pytest.mark.parametrize("space", [{"trackio_space_id": "me/runs"}, {"trackio_static_space_id": "me/static"}])
def test_a_space_the_config_names_is_left_to_it(space):
    keys, _, _ = tracking({"output_dir": "o", "report_to": "trackio", **space}, GRPO, "c.yaml")
    assert "trackio_static_space_id" not in keys
