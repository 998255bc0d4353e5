"""run/resume.py: whether a run continues what its output folder holds: the same run resumes without a word,
another one is refused showing the difference, continued (--resume) or moved aside (--fresh), and a
checkpoint this run's layout cannot load is refused even with --resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.run.resume import layout_problem, previous_run_to_move
from trlstack.run.settings import TrainSettings


def checkpoint(folder: Path, step: int, shards: int | None) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if shards:
        (path / "pytorch_model_fsdp_0").mkdir()
        for rank in range(shards):
            (path / "pytorch_model_fsdp_0" / f"__{rank}_0.distcp").write_bytes(b"")
    return path


@pytest.mark.parametrize("resume", [False, True])
def test_a_sharded_checkpoint_is_not_resumed_by_another_process_count_even_with_resume(tmp_path, resume):
    checkpoint(tmp_path, 3, shards=2)
    settings = TrainSettings(recipe="grpo", resume=resume)
    with pytest.raises(UsageError, match="holds FSDP2 shards of 2 processes and this run has 4"):
        previous_run_to_move(settings, tmp_path, RECIPES["grpo"], {}, print, ("fsdp2", 4))


def test_a_whole_checkpoint_is_not_resumed_sharded(tmp_path):
    checkpoint(tmp_path, 3, shards=None)
    with pytest.raises(UsageError, match="was saved whole, by a run without sharding"):
        previous_run_to_move(TrainSettings(recipe="grpo"), tmp_path, RECIPES["grpo"], {}, print, ("fsdp2", 2))


def test_the_same_layout_resumes_and_fresh_moves_another_aside(tmp_path):
    checkpoint(tmp_path / "out", 3, shards=2)
    recipe = RECIPES["grpo"]
    assert (
        previous_run_to_move(TrainSettings(recipe="grpo"), tmp_path / "out", recipe, {}, print, ("fsdp2", 2))
        is None
    )
    told = []
    fresh = TrainSettings(recipe="grpo", fresh=True)
    aside = previous_run_to_move(fresh, tmp_path / "out", recipe, {}, told.append, ("none", 2))
    assert aside is not None and aside.name.startswith("out.")
    assert "holds FSDP2 shards of 2 processes" in told[0]


GRPO = RECIPES["grpo"]
CONFIG = {"model_name_or_path": "org/new", "dataset_name": "d", "reward_funcs": ["accuracy_reward"]}


def left_run(folder: Path, **config) -> Path:
    """A run train left in `folder`: its merged config and a checkpoint."""
    checkpoint(folder, 2, shards=None)
    (folder / "trlstack-grpo.yaml").write_text(yaml.safe_dump({**CONFIG, **config}))
    return folder


def test_an_empty_folder_and_the_same_run_resume_without_a_word(tmp_path):
    told: list[str] = []
    assert (
        previous_run_to_move(TrainSettings(recipe="grpo"), tmp_path / "out", GRPO, CONFIG, told.append)
        is None
    )
    out = left_run(tmp_path / "out")
    assert previous_run_to_move(TrainSettings(recipe="grpo"), out, GRPO, CONFIG, told.append) is None
    assert told == []


def test_another_run_is_refused_showing_the_difference_and_both_choices(tmp_path):
    out = left_run(tmp_path / "out", model_name_or_path="org/old")
    with pytest.raises(UsageError) as error:
        previous_run_to_move(TrainSettings(recipe="grpo"), out, GRPO, CONFIG, print)
    message = str(error.value)
    assert message.startswith(
        f"{out} holds another run than this one (compared with its trlstack-grpo.yaml):"
    )
    assert "    model_name_or_path: org/old -> org/new\n" in message
    assert "--fresh (TRLSTACK_FRESH=1): move it aside to " in message
    assert "--resume (TRLSTACK_RESUME=1): continue it anyway" in message
    assert (out / "checkpoint-2").is_dir()  # nothing moved


def test_resume_continues_another_run_saying_how_it_differs(tmp_path):
    out = left_run(tmp_path / "out", model_name_or_path="org/old")
    told: list[str] = []
    assert (
        previous_run_to_move(TrainSettings(recipe="grpo", resume=True), out, GRPO, CONFIG, told.append)
        is None
    )
    assert told == [
        f"continuing the run in {out} although it differs (--resume): model_name_or_path: org/old -> org/new"
    ]


def test_fresh_names_where_another_run_goes_and_leaves_the_moving_to_the_caller(tmp_path):
    out = left_run(tmp_path / "out", model_name_or_path="org/old")
    told: list[str] = []
    aside = previous_run_to_move(TrainSettings(recipe="grpo", fresh=True), out, GRPO, CONFIG, told.append)
    assert aside is not None and aside.parent == tmp_path and aside.name.startswith("out.")
    differs = "model_name_or_path: org/old -> org/new"
    assert told == [f"the other run in {out} differs ({differs}); --fresh moves it aside to {aside}"]
    assert (out / "checkpoint-2").is_dir() and not aside.exists()


def test_the_layout_problem_is_read_from_the_newest_checkpoint(tmp_path):
    assert layout_problem(tmp_path, "fsdp2", 2) is None  # no checkpoint: nothing to load
    checkpoint(tmp_path, 1, shards=None)
    checkpoint(tmp_path, 4, shards=2)
    assert layout_problem(tmp_path, "fsdp2", 2) is None
    assert "holds FSDP2 shards of 2 processes and this run has 4" in layout_problem(tmp_path, "fsdp2", 4)
