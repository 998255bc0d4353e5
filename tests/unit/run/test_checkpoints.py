"""Finding where a run left off."""

from __future__ import annotations

from trlstack.run.checkpoints import newest_checkpoint


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
