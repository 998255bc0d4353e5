"""Finding where a run left off."""

from __future__ import annotations

import json

from trlstack.run.checkpoints import finished, newest_checkpoint


def checkpoint(root, step, complete=True):
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "trainer_state.json").write_text("{}")
    return path


def test_no_output_dir_means_a_fresh_start(tmp_path):
    assert newest_checkpoint(tmp_path / "absent") == (None, [])


def test_an_empty_output_dir_means_a_fresh_start(tmp_path):
    assert newest_checkpoint(tmp_path) == (None, [])


def test_the_highest_step_wins_numerically_not_by_name(tmp_path):
    checkpoint(tmp_path, 9)
    newest = checkpoint(tmp_path, 10)
    checkpoint(tmp_path, 2)
    assert newest_checkpoint(tmp_path) == (newest, [])


def test_incomplete_checkpoints_are_passed_over_and_reported(tmp_path):
    good = checkpoint(tmp_path, 100)
    torn = checkpoint(tmp_path, 200, complete=False)
    assert newest_checkpoint(tmp_path) == (good, [torn])
    assert torn.is_dir()


def test_a_checkpoint_still_marked_in_progress_is_incomplete(tmp_path):
    # transformers' save-on-SIGTERM writes trainer_state.json and then removes its marker: killed in between,
    # the folder has both, and must not be resumed from.
    good = checkpoint(tmp_path, 3)
    cut = checkpoint(tmp_path, 4)
    (cut / "checkpoint-is-incomplete.txt").write_text("Checkpoint started at step 4 and in progress...")
    assert newest_checkpoint(tmp_path) == (good, [cut])


def test_other_names_and_files_are_ignored(tmp_path):
    checkpoint(tmp_path, 5)
    (tmp_path / "checkpoint-7").write_text("a file, not a folder")
    (tmp_path / "checkpoint-best").mkdir()
    (tmp_path / "tmp-checkpoint-9").mkdir()
    assert newest_checkpoint(tmp_path)[0] == tmp_path / "checkpoint-5"


def test_only_incomplete_checkpoints_mean_a_fresh_start(tmp_path):
    torn = checkpoint(tmp_path, 1, complete=False)
    assert newest_checkpoint(tmp_path) == (None, [torn])


def test_a_checkpoint_at_the_runs_last_step_is_finished_and_one_before_it_is_not(tmp_path):
    def saved(step, **state):
        path = tmp_path / f"checkpoint-{step}"
        path.mkdir()
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step, **state}))
        return path

    last, before = saved(40, max_steps=40, num_train_epochs=2), saved(39, max_steps=40, num_train_epochs=2)
    assert finished(last, {"max_steps": 40}) == 40 and finished(before, {"max_steps": 40}) is None
    assert finished(last, {"max_steps": 80}) is None  # max_steps raised: more to train
    # epoch-based: finished at the run's own count of steps for as many epochs; unknown epochs train on
    assert finished(last, {"num_train_epochs": 2}) == 40 and finished(last, {"num_train_epochs": 3}) is None
    assert finished(last, {}) is None
    no_state = checkpoint(tmp_path, 7)  # nothing to go by: transformers decides
    assert finished(no_state, {"max_steps": 1}) is None
