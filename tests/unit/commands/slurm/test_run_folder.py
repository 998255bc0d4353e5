"""The job's run folder on the submit host (slurm/run_folder.py), made ready before anything is queued: room
on its shared disk for one checkpoint, and another run in it refused, moved aside once here (--fresh) or
continued (--resume); a dry run refuses what writing refuses and moves nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trlstack.cli import main
from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.run_folder import ready_run_folder
from trlstack.errors import UsageError

from .harness import flat, settings


def previous_run(run_dir: Path, model: str) -> None:
    """A run train left: its merged config and a checkpoint."""
    (run_dir / "checkpoint-3").mkdir(parents=True)
    config = {"model_name_or_path": model, "dataset_name": "d", "reward_funcs": ["accuracy_reward"]}
    (run_dir / "trlstack-grpo.yaml").write_text(json.dumps(config))


def test_another_run_in_the_run_folder_is_refused_before_submitting(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}/runs/grpo holds another run than this one" in err
    assert "model_name_or_path: org/old -> org/new" in err
    assert "--fresh (TRLSTACK_FRESH=1): move it aside" in err and "--resume (TRLSTACK_RESUME=1)" in err
    assert not (tmp_path / "sbatch.jsonl").exists()


@pytest.mark.parametrize("choice", [[], ["--fresh"]])
def test_a_dry_run_refuses_another_run_as_writing_does_and_moves_nothing(submit_host, capsys, choice):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--dry-run"]
    assert main([*argv, *choice]) == (0 if choice else 1)
    captured = capsys.readouterr()
    if choice:
        assert captured.out.startswith("#!/bin/bash") and "stays where it is" in captured.err
    else:
        assert "holds another run than this one" in captured.err and not captured.out
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()  # nothing moved
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["grpo"]


def test_shared_storage_without_room_for_one_checkpoint_is_refused_before_queueing(
    submit_host, capsys, monkeypatch
):
    from trlstack.run import space

    tmp_path, argv = submit_host
    model = tmp_path / "tiny"
    model.mkdir()
    tiny = {"model_type": "qwen2", "vocab_size": 490, "hidden_size": 128, "intermediate_size": 256}
    tiny |= {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}
    (model / "config.json").write_text(json.dumps({**tiny, "tie_word_embeddings": True}))
    for part in ("tokenizer.json", "model.safetensors"):  # what the task check looks for in a model folder
        (model / part).write_text("{}")
    monkeypatch.setattr(space, "free_space", lambda folder: 3_100_000)  # the disk is the boundary here
    argv += ["--model", str(model), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (
        f"{tmp_path}/runs/grpo has 3.1 MB free, and one checkpoint of this run takes at least 4.3 MB" in err
    )
    assert "choose another --output-dir on a disk with room" in err
    assert not (tmp_path / "sbatch.jsonl").exists() and not (tmp_path / "runs").exists()
    # A model this host has not cached: said, and queued (each trainer checks again before it starts).
    argv[argv.index("--model") + 1] = "org/not-cached-here"
    assert main(argv) == 0
    assert "cannot tell how much room a checkpoint needs" in capsys.readouterr().err


def test_fresh_moves_the_other_run_aside_once_on_the_submit_host(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main([*argv, "--fresh"]) == 0
    aside = [path for path in (tmp_path / "runs").iterdir() if path.name.startswith("grpo.")]
    assert len(aside) == 1 and (aside[0] / "checkpoint-3").is_dir()
    assert not (tmp_path / "runs" / "grpo").exists()
    assert f"moved {tmp_path}/runs/grpo to {aside[0]}; nothing in it was changed or deleted" in (
        capsys.readouterr().err
    )
    # The trainers never move it again, whatever the submitting shell exported.
    script = (tmp_path / "runs" / "trlstack-grpo.sbatch").read_text()
    assert "TRLSTACK_FRESH= " in script and " --resume" not in script


def test_resume_lets_the_trainers_continue_the_other_run(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main([*argv, "--resume"]) == 0
    assert "continuing the run in" in capsys.readouterr().err
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()
    script = flat((tmp_path / "runs" / "trlstack-grpo.sbatch").read_text())
    assert '--output-dir "$RUN_DIR" --resume --vllm-url' in script


def test_the_same_run_is_resumed_without_a_word(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/new")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 0
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()


def test_a_dry_run_previews_without_weighing_the_disk_which_may_be_another_machines(tmp_path, monkeypatch):
    from trlstack.run import space

    model = tmp_path / "tiny"
    model.mkdir()
    tiny = {"model_type": "qwen2", "vocab_size": 490, "hidden_size": 128, "intermediate_size": 256}
    tiny |= {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}
    (model / "config.json").write_text(json.dumps(tiny))
    monkeypatch.setattr(space, "free_space", lambda folder: 1000)  # the disk is the boundary here
    job = check(settings(model=str(model), output_dir=str(tmp_path / "runs")))
    ready_run_folder(job, dry_run=True)
    with pytest.raises(UsageError, match="has 1.0 kB free, and one checkpoint of this run takes at least"):
        ready_run_folder(job, dry_run=False)
    assert not (tmp_path / "runs").exists()
