"""run/sharding.py: the choice from the estimate, the accelerate config file as data and as YAML, which
checkpoint a run may resume, and the refusals (zero3, layouts that cannot fit) by every spelling."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import memory
from trlstack.run import launch, sharding

GIB = 1 << 30
QWEN = {"model_type": "qwen2", "num_key_value_heads": 2, "tie_word_embeddings": True}
QWEN_05B = {  # Qwen2.5-0.5B's sizes (494M parameters, tests/unit/plan/test_memory.py)
    **QWEN, "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14,
}  # fmt: skip
QWEN_7B = {  # Qwen2.5-7B's (7.6B)
    **QWEN, "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "tie_word_embeddings": False,
}  # fmt: skip


def weighed(config=QWEN_7B, gpu_gib=80, processes=2, share=0.0, recipe="grpo", settings=None):
    estimate, why = memory.estimate(config, recipe, settings or {})
    return sharding.Memory(estimate, why, None if gpu_gib is None else gpu_gib * GIB, share, processes)


@pytest.mark.parametrize(
    ("raw", "value"), [("auto", "auto"), ("none", "none"), ("FSDP2", "fsdp2"), (" fsdp2 ", "fsdp2")]
)
def test_the_sharding_values(raw, value):
    assert sharding.sharding_choice(raw) == value


@pytest.mark.parametrize("raw", ["zero3", "ZeRO-3", "deepspeed"])
def test_zero3_is_refused_with_the_reason(raw):
    with pytest.raises(argparse.ArgumentTypeError, match="nvcc, which the image does not ship"):
        sharding.sharding_choice(raw)


@pytest.mark.parametrize("raw", ["fsdp", "fsdp1", "ddp", ""])
def test_other_values_are_refused_naming_the_choices(raw):
    with pytest.raises(argparse.ArgumentTypeError, match="auto, none, fsdp2"):
        sharding.sharding_choice(raw)


def test_auto_keeps_ddp_where_a_whole_copy_fits():
    assert sharding.choose("auto", weighed(QWEN_05B, 80)) == sharding.Choice(
        "none", "DDP: a whole copy fits in each GPU"
    )


def test_auto_shards_where_ddp_would_not_fit():
    # 7.6B at 16 bytes + DDP's 6: 156.0 GiB whole; over 2 processes 56.7 GiB each + 5.8 GiB gathered: 62.5 GiB
    # each, of an 80 GiB GPU
    choice = sharding.choose("auto", weighed(QWEN_7B, 80, processes=2))
    assert choice == sharding.Choice("fsdp2", "DDP would not fit; sharded over 2 processes")


def test_auto_with_an_unknown_estimate_or_gpu_keeps_ddp():
    assert sharding.choose("auto", weighed({"model_type": "gpt2"})).sharding == "none"
    assert sharding.choose("auto", weighed(gpu_gib=None)).sharding == "none"
    assert sharding.choose("auto", weighed(QWEN_7B, 80), cpu=True) == sharding.Choice("none", "a CPU run")


def test_vllm_on_the_same_gpu_leaves_less_for_training():
    # 0.5B at 16 + 6 bytes: 10.1 GiB under DDP; 0.7 of a 16 GiB GPU is 11.2 GiB; with vLLM's 0.3, 0.7 of the
    # 11.2 GiB left is 7.8 GiB: DDP does not fit, FSDP2 over 2 (3.7 + 0.6 GiB gathered) does
    assert 16 * GIB * 0.7 * 0.7 < 494_032_768 * 22 <= 16 * GIB * 0.7
    assert sharding.choose("auto", weighed(QWEN_05B, 16, processes=2)).sharding == "none"
    assert sharding.choose("auto", weighed(QWEN_05B, 16, processes=2, share=0.3)).sharding == "fsdp2"


def test_a_layout_that_cannot_fit_even_sharded_is_refused_with_the_numbers_and_the_fix():
    with pytest.raises(UsageError) as refused:
        sharding.choose("auto", weighed(QWEN_7B, 40, processes=2))
    message = str(refused.value)
    assert "FSDP2 over 2 processes needs 62.5 GiB per process, but a GPU has 40.0 GiB for training" in message
    # 113.5 GiB of states over what 5.8 GiB gathered leaves of 40 GiB: 3.4, so 4
    assert "train on 4 or more GPUs with --sharding fsdp2" in message
    assert "model_init_kwargs: {dtype: bfloat16}" in message and "use_peft: true" in message


def test_one_process_that_cannot_fit_is_refused_as_ddp():
    with pytest.raises(UsageError, match="DDP \\(a whole copy in each process\\) needs 156.0 GiB"):
        sharding.choose("auto", weighed(QWEN_7B, 80, processes=1))


def test_asking_for_ddp_where_it_cannot_fit_names_fsdp2():
    with pytest.raises(
        UsageError, match="shard it: --sharding fsdp2 \\(or auto, the default; TRLSTACK_SHARDING\\)"
    ):
        sharding.choose("none", weighed(QWEN_7B, 80, processes=2))


def test_asking_for_fsdp2_is_honoured_where_it_fits():
    assert sharding.choose("fsdp2", weighed(QWEN_05B, 80)) == sharding.Choice("fsdp2", "asked for")
    lone = sharding.choose("fsdp2", weighed(QWEN_05B, 80, processes=1))
    assert lone.sharding == "fsdp2" and "nothing is shared out" in lone.why
    with pytest.raises(UsageError, match="FSDP2 over 2 processes needs"):
        sharding.choose("fsdp2", weighed(QWEN_7B, 40, processes=2))


def test_the_estimate_lines_say_what_is_not_counted():
    lines = weighed(QWEN_7B, 80, processes=2, share=0.3).lines()
    assert (
        lines[0].startswith("memory counted: 7.62B parameters x 16 bytes") and "gradient buckets" in lines[0]
    )
    assert (
        lines[1]
        == "per process: DDP 156.0 GiB, FSDP2 over 2 62.5 GiB; 56.0 GiB per GPU for training (0.3 of "
        "80.0 GiB left to vLLM)"
    )
    assert lines[2].startswith("not counted: activations, the CUDA context, the allocator's fragmentation")
    assert weighed({"model_type": "gpt2"}).lines() == [
        "memory estimate unknown: model_type 'gpt2' is not one counted here (llama, mistral, qwen2, qwen3)"
    ]


def test_the_accelerate_config_for_one_machine():
    config = launch.accelerate_config(processes=2, machines=1, machine_rank=0, precision="bf16")
    keys = ("distributed_type", "num_processes", "num_machines", "machine_rank")
    assert [config[key] for key in keys] == ["FSDP", 2, 1, 0]
    assert config["mixed_precision"] == "bf16" and config["use_cpu"] is False
    assert config["fsdp_config"] == {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_sync_module_states": True,
        "fsdp_offload_params": False,
        "fsdp_reshard_after_forward": True,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_activation_checkpointing": False,
    }
    assert "main_process_ip" not in config


def test_the_accelerate_config_for_several_machines_counts_every_process():
    config = launch.accelerate_config(4, 2, 1, "fp32", "10.0.0.1", 29500)
    assert (config["num_processes"], config["machine_rank"], config["mixed_precision"]) == (8, 1, "no")
    assert (config["main_process_ip"], config["main_process_port"], config["rdzv_backend"]) == (
        "10.0.0.1",
        29500,
        "static",
    )


def test_the_rendered_file_reads_back_as_the_data():
    config = launch.accelerate_config(2, 1, 0, "bf16")
    text = launch.render(config)
    assert text.startswith("# Written by `train`") and yaml.safe_load(text) == config


def test_a_checkpoint_counts_its_shards():
    assert sharding.checkpoint_shards(["__0_0.distcp", "__1_0.distcp", ".metadata"]) == 2
    assert sharding.checkpoint_shards([".metadata"]) is None


@pytest.mark.parametrize(
    ("shards", "layout", "problem"),
    [
        (None, ("none", 2), None),
        (2, ("fsdp2", 2), None),
        (None, ("fsdp2", 2), "was saved whole, by a run without sharding"),
        (2, ("none", 2), "holds FSDP2 shards of 2 processes, which only a sharded run reads"),
        (2, ("fsdp2", 4), "holds FSDP2 shards of 2 processes and this run has 4"),
    ],
)
def test_which_checkpoint_a_layout_resumes(shards, layout, problem):
    found = sharding.resume_problem("checkpoint-3", shards, *layout)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and "--fresh (TRLSTACK_FRESH=1)" in found


def test_the_summary_for_plan_and_doctor():
    gpus = [Gpu(0, memory_bytes=80 * GIB), Gpu(1, memory_bytes=80 * GIB)]
    assert (
        sharding.summary(QWEN_7B, gpus, 2, 0.0)[-1]
        == "sharding auto: fsdp2 (DDP would not fit; sharded over 2 processes)"
    )
    assert sharding.summary(QWEN_7B, gpus[:1], 1, 0.0)[-1].startswith(
        "sharding: refused: the training memory does not fit"
    )
    assert (
        sharding.summary(QWEN_7B, [Gpu(0)], 1, 0.0)[-1]
        == "sharding auto: none (DDP: the estimate is unknown, so nothing is sharded)"
    )


def test_a_model_config_is_read_from_a_folder_or_the_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN_05B))
    assert sharding.read_model_config(str(tmp_path), {}) == QWEN_05B
    assert sharding.read_model_config(str(tmp_path / "config.json"), {}) == QWEN_05B


@pytest.mark.parametrize(
    ("text", "why"), [("{", "not a readable JSON file"), ("[1]", "holds no JSON object")]
)
def test_a_bad_model_config_is_refused(tmp_path, text, why):
    (tmp_path / "c.json").write_text(text)
    with pytest.raises(UsageError, match=why):
        sharding.read_model_config(str(tmp_path / "c.json"), {})


def test_a_model_without_a_config_names_what_to_give(tmp_path):
    with pytest.raises(UsageError, match="no config.json found there; give a model folder"):
        sharding.read_model_config(str(tmp_path), {"HF_HUB_CACHE": str(tmp_path)})
