"""trlstack slurm takes --sharding as train declares it and hands it to every node's train."""

from __future__ import annotations

import dataclasses

from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.render import render

from .harness import flat, settings


def test_a_chosen_sharding_reaches_every_trainer():
    job = settings()
    job = dataclasses.replace(job, train=dataclasses.replace(job.train, sharding="fsdp2"))
    assert "train grpo --model Qwen/Qwen2.5-0.5B-Instruct --sharding fsdp2 --output-dir" in flat(
        render(check(job))
    )


def test_auto_is_left_to_each_node():
    assert "--sharding" not in flat(render(check(settings())))


def test_slurm_reads_the_flag_and_the_variable_as_train_does(shared_tmp, capsys, monkeypatch):
    tmp_path = shared_tmp  # under /tmp, which a dry run refuses as writing does
    from trlstack.cli import main

    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--image", "/x.sif"]
    argv += ["--output-dir", str(tmp_path), "--dry-run"]
    monkeypatch.setenv("TRLSTACK_SHARDING", "fsdp2")
    assert main(argv) == 0
    assert "--sharding fsdp2" in flat(capsys.readouterr().out)
    assert main([*argv, "--sharding", "none"]) == 0
    assert "--sharding none" in flat(capsys.readouterr().out)
    monkeypatch.setenv("TRLSTACK_SHARDING", "zero3")
    assert main(argv) == 1
    assert "nvcc" in capsys.readouterr().err
