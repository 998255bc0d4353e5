"""train --sharding: the launch it builds (the accelerate config file instead of the DDP flags), what auto
chooses from the model's config.json and the GPUs' memory, what is refused, and the preview (resuming only
under the layout a checkpoint was saved with: run/test_resume.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.recipes import RECIPES
from trlstack.roles import train
from trlstack.roles.command_line import parse_role
from trlstack.roles.train.main import ROLE
from trlstack.run.launch import LAUNCHER, build_launch
from trlstack.run.settings import TrainSettings

GRPO = yaml.safe_load(RECIPES["grpo"].bundled_config.read_text())
GIB = 1 << 30
QWEN_7B = {
    "model_type": "qwen2", "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "tie_word_embeddings": False,
}  # fmt: skip
TAIL = ["-m", "trlstack.rank.run", "trl.scripts.grpo", "--config", "outputs/grpo/trlstack-grpo.yaml"]


def gpus(n, gib=80):
    return [Gpu(i, uuid=f"GPU-{i}", compute_capability=(9, 0), memory_bytes=gib * GIB) for i in range(n)]


def test_fsdp2_launches_with_the_accelerate_config_beside_the_merged_one():
    launch = build_launch(TrainSettings(recipe="grpo", sharding="fsdp2"), GRPO, "c", gpus(2))
    assert launch.command.argv == [
        *LAUNCHER, "--config_file", "outputs/grpo/trlstack-accelerate.yaml", *TAIL
    ]  # fmt: skip
    assert launch.accelerate_path == Path("outputs/grpo/trlstack-accelerate.yaml")
    assert launch.accelerate_config is not None
    assert (launch.accelerate_config["num_processes"], launch.accelerate_config["mixed_precision"]) == (
        2,
        "bf16",
    )
    assert (launch.sharding, launch.processes) == ("fsdp2", 2)
    assert "sharding fsdp2 (asked for)" in launch.notes


def test_fsdp2_over_several_machines_puts_the_meeting_in_the_file():
    settings = TrainSettings(
        recipe="grpo", sharding="fsdp2", num_machines=2, machine_rank=1, main_process_ip="10.0.0.1"
    )
    launch = build_launch(settings, GRPO, "c", gpus(4))
    assert "--machine_rank" not in launch.command.argv and launch.processes == 8
    assert launch.accelerate_config is not None
    assert (launch.accelerate_config["machine_rank"], launch.accelerate_config["main_process_ip"]) == (
        1,
        "10.0.0.1",
    )


def test_auto_shards_a_7b_model_on_two_80_gib_gpus_and_keeps_ddp_for_a_small_one():
    sharded = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(2), model_config=QWEN_7B)
    assert sharded.sharding == "fsdp2" and sharded.command.argv[len(LAUNCHER)] == "--config_file"
    assert "sharding fsdp2 (DDP would not fit; sharded over 2 processes)" in sharded.notes
    small = {**QWEN_7B, "num_hidden_layers": 2, "vocab_size": 1000}
    whole = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(2), model_config=small)
    assert (
        whole.sharding == "none" and "--multi_gpu" in whole.command.argv and whole.accelerate_config is None
    )


def test_auto_without_a_readable_model_config_keeps_ddp_and_says_so():
    launch = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(2))
    assert launch.sharding == "none"
    assert any(note.startswith("memory estimate unknown: no config.json of") for note in launch.notes)


def test_colocated_vllm_takes_its_share_before_the_choice():
    settings = TrainSettings(recipe="grpo", vllm_mode="colocate")
    with pytest.raises(UsageError) as error:
        build_launch(settings, GRPO, "c", gpus(2), model_config=QWEN_7B)
    assert (
        "vllm_gpu_memory_utilization (in c or after `--`) 0.3 gives vLLM 24.0 GiB of each 80.0 GiB GPU and "
        "leaves the trainer 56.0 GiB, but training needs 62.5 GiB per process (FSDP2 over 2 processes"
    ) in str(error.value)
    assert "lower vllm_gpu_memory_utilization (in c or after `--`) to 0.21 or less" in str(error.value)


def test_values_after_the_double_dash_are_weighed_as_the_script_takes_them():
    smaller_share = TrainSettings(recipe="grpo", vllm_mode="colocate", extra=["--vllm_gpu_mem", "0.1"])
    launch = build_launch(smaller_share, GRPO, "c", gpus(2), model_config=QWEN_7B)
    assert launch.sharding == "fsdp2"  # 72 GiB for training fits the 62.5 a shard needs
    adapter = TrainSettings(recipe="grpo", extra=["--use-peft=true"])
    launch = build_launch(adapter, GRPO, "c", gpus(2), model_config=QWEN_7B)
    assert "memory estimate unknown: use_peft trains an adapter, which is not estimated" in launch.notes


def test_a_layout_that_cannot_fit_is_refused_before_anything_starts():
    with pytest.raises(UsageError, match="train on 4 or more GPUs with --sharding fsdp2"):
        build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(2, gib=40), model_config=QWEN_7B)


def test_sharding_on_the_cpu_is_refused_with_the_reason():
    with pytest.raises(UsageError, match="accelerate shards only on GPUs"):
        build_launch(TrainSettings(recipe="grpo", cpu=True, sharding="fsdp2"), GRPO, "c", [])
    assert build_launch(TrainSettings(recipe="grpo", cpu=True), GRPO, "c", []).sharding == "none"


@pytest.mark.parametrize(
    ("argv", "environ"),
    [(["grpo", "--sharding", "zero3"], {}), (["grpo"], {"TRLSTACK_SHARDING": "zero3"})],
)
def test_zero3_is_refused_by_flag_and_variable_with_the_reason(argv, environ, capsys):
    with pytest.raises((SystemExit, UsageError)) as refused:
        parse_role(ROLE, TrainSettings, argv, environ)
    shown = str(refused.value) + capsys.readouterr().err
    assert "nvcc, which the image does not ship" in shown


@pytest.mark.parametrize(("environ", "value"), [({}, "auto"), ({"TRLSTACK_SHARDING": "fsdp2"}, "fsdp2")])
def test_the_setting_reads_the_variable(environ, value):
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo"], environ)
    assert settings.sharding == value


def test_print_command_shows_the_accelerate_config_too(tmp_path, clean_env, capsys, no_exec):
    clean_env.chdir(tmp_path)
    assert train.main(["grpo", "--gpus", "2", "--sharding", "fsdp2", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert f"{shlex.join(LAUNCHER)} --config_file outputs/grpo/trlstack-accelerate.yaml -m" in out
    assert "# outputs/grpo/trlstack-accelerate.yaml (written when train runs):" in out
    assert "#     fsdp_state_dict_type: SHARDED_STATE_DICT" in out
    assert not (tmp_path / "outputs").exists()
