"""trlstack slurm takes --ranks-per-gpu, --vllm-kv-cache-gib and --weight-push-timeout as train declares them
and hands them to every node's train; what train would refuse on a node (several ranks beside colocated vLLM
engines that size their own KV caches, a fixed KV cache with a server, a bound on a push with no vLLM,
async-grpo's own bound, its rank limit counted with the ranks per GPU) is refused here."""

from __future__ import annotations

import dataclasses

import pytest
from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.render import render
from trlstack.errors import UsageError

from .harness import Run, flat, settings


def job(recipe="grpo", cpu=False, **train):
    base = settings(recipe=recipe, cpu=cpu)
    return dataclasses.replace(base, train=dataclasses.replace(base.train, recipe=recipe, **train))


def test_both_reach_every_trainer_node(tmp_path):
    asked = dataclasses.replace(job(ranks_per_gpu=2, weight_push_timeout=900.0), nodes=3)
    text = render(check(asked))
    assert "training on 2 nodes (16 processes each)" in text
    run = Run(tmp_path, text, 3)
    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
    trainers = [call["argv"] for node, call in run.roles().items() if node != run.nodes[0]]
    assert len(trainers) == 2
    for argv in trainers:
        at = argv.index("--ranks-per-gpu")
        assert argv[at : at + 4] == ["--ranks-per-gpu", "2", "--weight-push-timeout", "900"]


def test_unset_each_node_takes_trains_defaults():
    text = flat(render(check(job())))
    assert "--ranks-per-gpu" not in text and "--weight-push-timeout" not in text


def test_slurm_reads_the_flags_and_the_variables_as_train_does(shared_tmp, capsys, monkeypatch):
    tmp_path = shared_tmp  # under /tmp, which a dry run refuses as writing does
    from trlstack.cli import main

    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--image", "/x.sif"]
    argv += ["--output-dir", str(tmp_path), "--dry-run"]
    monkeypatch.setenv("TRLSTACK_RANKS_PER_GPU", "2")
    monkeypatch.setenv("TRLSTACK_WEIGHT_PUSH_TIMEOUT", "1200")
    assert main(argv) == 0
    assert "--ranks-per-gpu 2 --weight-push-timeout 1200" in flat(capsys.readouterr().out)
    assert main([*argv, "--weight-push-timeout", "300"]) == 0
    assert "--weight-push-timeout 300" in flat(capsys.readouterr().out)
    monkeypatch.setenv("TRLSTACK_WEIGHT_PUSH_TIMEOUT", "0")
    assert main(argv) == 1
    assert "--weight-push-timeout" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("recipe", "train", "layout", "refusal"),
    [
        ("grpo", {"ranks_per_gpu": 2}, {"serve_nodes": 0}, "--ranks-per-gpu 2 with --serve-nodes 0 starts"),
        ("async-grpo", {"weight_push_timeout": 60.0}, {}, "--weight-push-timeout .*--weight-sync-timeout"),
        ("async-grpo", {"ranks_per_gpu": 2}, {"gpus_per_node": 2}, "async-grpo with 4 trainer processes"),
        (
            "grpo",
            {"vllm_kv_cache_gib": 2.0},
            {},
            r"vLLM engine inside each trainer \(--serve-nodes 0\), but in",
        ),
        ("async-grpo", {"vllm_kv_cache_gib": 2.0}, {}, "in server mode the server sizes its own"),
    ],
)
def test_what_train_would_refuse_on_a_node_is_refused_before_submitting(recipe, train, layout, refusal):
    with pytest.raises(UsageError, match=refusal):
        check(dataclasses.replace(job(recipe, **train), **layout))


def test_a_bound_on_a_push_without_vllm_is_refused():
    asked = dataclasses.replace(job(cpu=True, weight_push_timeout=60.0), gpus_per_node=None, serve_nodes=0)
    with pytest.raises(UsageError, match="--cpu runs without vLLM, but --weight-push-timeout"):
        check(asked)


def test_two_ranks_on_one_gpu_each_are_async_grpos_two():
    asked = dataclasses.replace(job("async-grpo", ranks_per_gpu=2), gpus_per_node=1)
    assert "--ranks-per-gpu 2" in flat(render(check(asked)))


def test_a_fixed_kv_cache_lets_several_colocated_ranks_share_a_gpu_on_every_node():
    asked = dataclasses.replace(job(ranks_per_gpu=2, vllm_kv_cache_gib=1.5), serve_nodes=0, nodes=2)
    text = flat(render(check(asked)))
    assert "--ranks-per-gpu 2 --vllm-kv-cache-gib 1.5" in text and "--vllm-mode colocate" in text
