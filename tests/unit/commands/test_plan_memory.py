"""`trlstack plan --model` and doctor print the trainer's memory estimate and what --sharding auto chooses."""

from __future__ import annotations

import json

import pytest
from trlstack import cli
from trlstack.commands.doctor.command import memory_finding
from trlstack.commands.doctor.judge import Facts
from trlstack.gpus import Gpu, Probe

QWEN_7B = {
    "model_type": "qwen2", "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "tie_word_embeddings": False,
}  # fmt: skip


@pytest.fixture
def model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN_7B))
    return tmp_path


def test_plan_prints_the_estimate_and_the_choice_beside_the_plan(model, clean_env, capsys):
    argv = ["plan", "--gpus", "4", "--model", str(model), "--gpu-memory", "80", "--format", "env"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "NUM_PROCESSES=2" in captured.out and "trlstack plan: " not in captured.out  # the .env stays clean
    assert (
        "trlstack plan: per process: DDP 156.0 GiB, FSDP2 over 2 62.5 GiB; 80.0 GiB per GPU" in captured.err
    )
    assert "trlstack plan: sharding auto: fsdp2 (DDP would not fit; sharded over 2 processes)" in captured.err


def test_plan_takes_the_config_json_itself_and_refuses_a_plan_that_cannot_fit(
    model, clean_env, capsys, tmp_path
):
    env = tmp_path / ".env"
    argv = ["plan", "--gpus", "2", "--model", str(model / "config.json"), "--gpu-memory", "80"]
    assert cli.main([*argv, "--format", "env", "-o", str(env)]) == 1
    captured = capsys.readouterr()
    assert "trlstack plan: per process: DDP 156.0 GiB" in captured.err  # the estimate, then the refusal
    assert "trlstack: error: the training memory does not fit" in captured.err
    assert "needs 156.0 GiB per process, but a GPU has 80.0 GiB for training" in captured.err
    assert captured.out == "" and not env.exists()  # a plan that cannot run is not written


def test_a_shared_gpu_plan_leaves_the_trainer_what_it_needs_or_is_refused_with_both_numbers(
    clean_env, capsys, tmp_path
):
    env = tmp_path / ".env"
    env.write_text("TRLSTACK_MODEL=mine\n")
    argv = ["plan", "--gpus", "1", "--share-gpus", "--gpu-memory", "80", "--format", "env", "-o", str(env)]
    # No --model: the default model (0.49B, float32 weights under TRL's defaults) beside vLLM.
    assert cli.main([*argv, "--gpu-memory-utilization", "0.95"]) == 1
    err = capsys.readouterr().err
    assert "--gpu-memory-utilization 0.95 gives vLLM 76.0 GiB of each 80.0 GiB GPU" in err
    assert "leaves the trainer 4.0 GiB, but training needs 10.1 GiB per process" in err
    assert "lower --gpu-memory-utilization to 0.87 or less" in err
    assert env.read_text() == "TRLSTACK_MODEL=mine\n"  # nothing written
    assert cli.main([*argv, "--gpu-memory-utilization", "0.85"]) == 0
    assert "GPU_MEMORY_UTILIZATION=0.85" in env.read_text()


def test_plan_with_an_unreadable_model_names_what_to_give(tmp_path, clean_env, capsys):
    assert cli.main(["plan", "--gpus", "2", "--model", str(tmp_path)]) == 1
    assert "no config.json found there; give a model folder" in capsys.readouterr().err


@pytest.mark.parametrize("memory", ["0", "-1", "lots"])
def test_plan_refuses_a_gpu_memory_that_is_no_size(memory, clean_env, capsys):
    assert cli.main(["plan", "--gpus", "2", "--model", "x", "--gpu-memory", memory]) != 0
    assert "argument --gpu-memory" in capsys.readouterr().err


def test_doctor_estimates_for_a_local_model_on_the_default_plan(model):
    found = Probe(tuple(Gpu(i, memory_bytes=80 << 30) for i in range(4)), "nvml")
    [finding] = memory_finding(Facts(probe=found), {"TRLSTACK_MODEL": str(model)})
    assert finding.topic == "memory" and finding.level == "info"
    assert "sharding auto: fsdp2 (DDP would not fit; sharded over 2 processes)" in finding.message


def test_doctor_warns_where_the_default_plan_cannot_fit(model):
    found = Probe((Gpu(0, memory_bytes=80 << 30),), "nvml")  # one GPU, shared with vLLM by default
    [finding] = memory_finding(Facts(probe=found), {"TRLSTACK_MODEL": str(model)})
    assert finding.level == "warn" and "sharding: refused" in finding.message


def test_doctor_says_nothing_for_a_hub_id_or_no_model(model):
    found = Probe((Gpu(0),), "nvml")
    assert memory_finding(Facts(probe=found), {"TRLSTACK_MODEL": "Qwen/Qwen2.5-7B"}) == []
    assert memory_finding(Facts(probe=found), {}) == []


def test_on_one_gpu_the_plan_weighs_the_models_size_against_the_measured_table(model, clean_env, capsys):
    # Qwen2.5-3B's shape, which one 141 GiB GPU trains beside vLLM's share (a 7B model in float32 it does not:
    # that plan is refused)
    shape = {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
    }
    (model / "config.json").write_text(json.dumps({**QWEN_7B, **shape, "vocab_size": 151936}))
    assert cli.main(["plan", "--gpus", "1", "--model", str(model), "--gpu-memory", "141"]) == 0
    out = capsys.readouterr().out
    # 3.4B parameters: the measured size nearest by ratio is 3B, not measured side by side yet: colocate
    assert (
        "layout: colocate, vLLM inside the trainer: colocate until a server on one GPU is measured faster "
        in out
    )
    assert "at 3B (3.4B parameters" in out
    assert cli.main(["plan", "--gpus", "1"]) == 0  # no model: the default model's size, 0.5B, measured
    assert "at 0.5B (the default model's size): a GRPO step of 1.10 s" in capsys.readouterr().out
