"""trlstack.run.launch: the exact accelerate command and merged config for each layout and mode,
on one machine or several."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from launch_harness import GRPO, gpus, launch_tail
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import make_plan
from trlstack.recipes import RECIPES
from trlstack.run.launch import LAUNCHER, build_launch
from trlstack.run.settings import TrainSettings


@pytest.mark.parametrize(("machine_gpus", "train_gpus"), [(2, 1), (4, 2), (8, 4)])
def test_exact_command_on_the_plans_training_gpus(machine_gpus, train_gpus):
    plan = make_plan(gpus(machine_gpus))
    # compose names the server (TRLSTACK_VLLM_URL): a server run on one training GPU too
    settings = TrainSettings(recipe="grpo", vllm_url="http://127.0.0.1:8000")
    launch = build_launch(settings, GRPO, "grpo.yaml", plan.train)
    multi = ["--multi_gpu"] if train_gpus > 1 else []
    assert launch.command.argv == [
        *LAUNCHER, "--num_processes", str(train_gpus), *multi,
        "--num_machines", "1", "--mixed_precision", "bf16", "--dynamo_backend", "no",
        *launch_tail(),
    ]  # fmt: skip
    assert launch.command.env == {
        "VLLM_HOST_IP": "127.0.0.1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "TRLSTACK_WEIGHT_PUSH_TIMEOUT": "600",
        "TRLSTACK_RANKS_PER_GPU": "1",
        "TRACKIO_DIR": "outputs/grpo/trackio",  # the run's metrics, in its output folder
        "TRLSTACK_WEIGHT_TRANSFER": "nccl",  # disjoint GPUs: TRL's own NCCL push
    }
    assert launch.config_path == Path("outputs/grpo/trlstack-grpo.yaml")


def test_server_mode_config_keeps_the_users_keys_and_adds_the_servers():
    settings = TrainSettings(recipe="grpo", vllm_url="http://vllm:8000", group_port=51300, host_ip="trainer")
    launch = build_launch(settings, GRPO, "grpo.yaml", gpus(4), is_local=lambda address: address == "trainer")
    config = launch.config
    assert {key: config[key] for key in GRPO if key != "output_dir"} == {
        key: value for key, value in GRPO.items() if key != "output_dir"
    }
    assert config["use_vllm"] is True
    assert config["vllm_mode"] == "server"
    assert config["vllm_server_base_url"] == "http://vllm:8000"
    assert config["vllm_group_port"] == 51300
    assert (config["bf16"], config["fp16"]) == (True, False)
    assert config["model_init_kwargs"] == {"attn_implementation": "kernels-community/flash-attn3"}
    assert launch.command.env == {
        "VLLM_HOST_IP": "trainer",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "TRLSTACK_WEIGHT_PUSH_TIMEOUT": "600",
        "TRLSTACK_RANKS_PER_GPU": "1",
        "TRACKIO_DIR": "outputs/grpo/trackio",  # the run's metrics, in its output folder
        "TRLSTACK_WEIGHT_TRANSFER": "nccl",  # disjoint GPUs: TRL's own NCCL push
    }
    assert "resume_from_checkpoint" not in config


def test_a_server_on_another_host_gets_the_address_this_machine_reaches_it_from():
    settings = TrainSettings(recipe="grpo", vllm_url="http://10.0.0.7:8000")
    routes = []

    def route(host, port):
        routes.append((host, port))
        return "10.0.0.5"

    launch = build_launch(settings, GRPO, "c", gpus(2), route=route)
    assert launch.command.env["VLLM_HOST_IP"] == "10.0.0.5"
    assert routes == [("10.0.0.7", 8000)]
    assert launch.notes[0] == "VLLM_HOST_IP=10.0.0.5 (the address this machine reaches 10.0.0.7 from)"


def test_rloo_and_online_dpo_run_their_scripts():
    rloo = build_launch(TrainSettings(recipe="rloo"), {"model_name_or_path": "m", "dataset_name": "d",
                        "reward_funcs": ["accuracy_reward"]}, "c", gpus(2))  # fmt: skip
    assert rloo.command.argv[-5:] == launch_tail("trl.scripts.rloo", "outputs/rloo/trlstack-rloo.yaml")
    config = {"model_name_or_path": "m", "dataset_name": "d", "reward_model_path": "r"}
    dpo = build_launch(TrainSettings(recipe="online-dpo"), config, "c", gpus(2))
    assert dpo.command.argv[-5:] == launch_tail(
        "trlstack.rank.online_dpo", "outputs/online-dpo/trlstack-online-dpo.yaml"
    )
    assert dpo.command.env["TRL_EXPERIMENTAL_SILENCE"] == "1"


def test_colocate_mode_needs_no_server():
    launch = build_launch(TrainSettings(recipe="grpo", vllm_mode="colocate"), GRPO, "c", gpus(1))
    assert launch.config["vllm_mode"] == "colocate"
    assert "vllm_server_base_url" not in launch.config
    assert launch.command.env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
        "TRLSTACK_WEIGHT_PUSH_TIMEOUT": "600",
        "TRLSTACK_RANKS_PER_GPU": "1",
        "TRACKIO_DIR": "outputs/grpo/trackio",  # the run's metrics, in its output folder
    }
    assert launch.command.argv[:5] == [*LAUNCHER, "--num_processes", "1"]


def test_cpu_smoke_is_tiny_fp32_and_without_vllm():
    settings = TrainSettings(recipe="grpo", cpu=True, model="org/m", dataset="org/d")
    launch = build_launch(settings, GRPO, "c", [])
    assert launch.command.argv == [
        *LAUNCHER, "--cpu", "--num_processes", "1",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *launch_tail(),
    ]  # fmt: skip
    config = launch.config
    assert config["model_name_or_path"] == "org/m"
    assert config["dataset_name"] == "org/d"
    assert (config["use_vllm"], config["use_cpu"], config["bf16"], config["fp16"]) == (
        False,
        True,
        False,
        False,
    )
    assert config["max_steps"] == 2
    assert config["num_generations"] == 2
    assert config["per_device_train_batch_size"] == 2
    assert config["model_init_kwargs"] == {"attn_implementation": "sdpa"}


def test_cpu_smoke_with_more_processes_runs_them_through_torch_elastic_over_gloo():
    # accelerate's --cpu launches one process whatever --num_processes says; --multi_gpu starts them all, and
    # use_cpu in the config puts them on the CPU, in one gloo process group.
    settings = TrainSettings(recipe="grpo", cpu=True, model="org/m", dataset="org/d", num_processes=2)
    launch = build_launch(settings, GRPO, "c", [])
    assert launch.command.argv == [
        *LAUNCHER, "--num_processes", "2", "--multi_gpu",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *launch_tail(),
    ]  # fmt: skip
    assert launch.config["use_cpu"] is True


# Several machines: one train on each, placed by its rank; accelerate gets the totals and the rendezvous.


def test_gpu_machines_meet_at_the_rank_0_machine():
    settings = TrainSettings(
        recipe="grpo",
        num_machines=3,
        machine_rank=2,
        main_process_ip="10.0.0.2",
        vllm_url="http://10.0.0.1:8000",
    )
    launch = build_launch(settings, GRPO, "grpo.yaml", gpus(8), route=lambda host, port: "10.0.0.4")
    assert launch.command.argv == [
        *LAUNCHER, "--num_processes", "24", "--multi_gpu",
        "--num_machines", "3", "--mixed_precision", "bf16", "--dynamo_backend", "no",
        "--machine_rank", "2", "--main_process_ip", "10.0.0.2", "--main_process_port", "29500",
        "--rdzv_backend", "static", *launch_tail(),
    ]  # fmt: skip
    assert launch.command.env == {
        "VLLM_HOST_IP": "10.0.0.4",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "TRLSTACK_WEIGHT_PUSH_TIMEOUT": "600",
        "TRLSTACK_RANKS_PER_GPU": "1",
        "TRACKIO_DIR": "outputs/grpo/trackio",  # the run's metrics, in its output folder
        "TRLSTACK_WEIGHT_TRANSFER": "nccl",  # disjoint GPUs: TRL's own NCCL push
    }
    assert "machine rank 2 of 3, meeting at 10.0.0.2:29500" in launch.notes


def test_cpu_machines_run_one_process_each_through_torch_elastic():
    # As for several processes on one machine: --multi_gpu starts them, use_cpu puts them in one gloo group.
    settings = TrainSettings(
        recipe="grpo",
        cpu=True,
        num_machines=2,
        machine_rank=1,
        main_process_ip="node2",
        main_process_port=29700,
    )
    launch = build_launch(settings, GRPO, "grpo.yaml", [])
    assert launch.command.argv == [
        *LAUNCHER, "--num_processes", "2", "--multi_gpu",
        "--num_machines", "2", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--machine_rank", "1", "--main_process_ip", "node2", "--main_process_port", "29700",
        "--rdzv_backend", "static", *launch_tail(),
    ]  # fmt: skip
    assert launch.command.env == {"TRLSTACK_RANKS_PER_GPU": "1", "TRACKIO_DIR": "outputs/grpo/trackio"}
    assert "machine rank 1 of 2, meeting at node2:29700" in launch.notes  # the Slurm job's log shows it


def test_transformers_own_save_on_sigterm_is_left_off_with_a_note():
    # It saves in each process alone, on SIGTERM only; train's stop handling saves in all together.
    launch = build_launch(
        TrainSettings(recipe="grpo"), {**GRPO, "enable_jit_checkpoint": True}, "mine.yaml", gpus(2)
    )
    assert "enable_jit_checkpoint" not in launch.config
    assert (
        "enable_jit_checkpoint in mine.yaml left off: train saves a checkpoint when stopped" in launch.notes
    )


def test_pre_ampere_gpus_train_in_fp16():
    launch = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(2, capability=(7, 5)))
    assert (launch.config["bf16"], launch.config["fp16"]) == (False, True)
    assert launch.command.argv[launch.command.argv.index("--mixed_precision") + 1] == "fp16"
    assert launch.config["model_init_kwargs"] == {"attn_implementation": "sdpa"}


def test_the_users_precision_and_attention_win():
    config = {**GRPO, "fp16": True, "bf16": False, "model_init_kwargs": {"attn_implementation": "eager"}}
    launch = build_launch(TrainSettings(recipe="grpo"), config, "mine.yaml", gpus(2))
    assert (launch.config["bf16"], launch.config["fp16"]) == (False, True)
    assert launch.config["model_init_kwargs"] == {"attn_implementation": "eager"}
    assert "precision fp16 (set in mine.yaml)" in launch.notes


def test_a_missing_hub_kernel_falls_back_with_a_note():
    def unavailable(name):
        return "not in the kernel cache and HF_HUB_OFFLINE is set"

    launch = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(2), unavailable=unavailable)
    assert launch.config["model_init_kwargs"]["attn_implementation"] == "sdpa"
    assert launch.notes[-3:] == [
        "attention: kernels-community/flash-attn3 skipped: not in the kernel cache and HF_HUB_OFFLINE is set",
        "attention: kernels-community/flash-attn2 skipped: not in the kernel cache and HF_HUB_OFFLINE is set",
        "attention sdpa",
    ]


def test_overrides_replace_model_dataset_reward_model_and_output_dir():
    config = {**GRPO, "datasets": [{"path": "other"}]}
    settings = TrainSettings(
        recipe="grpo", model="m", dataset="d", reward_model="r", output_dir="/out/run1", num_processes=2
    )
    launch = build_launch(settings, config, "c", gpus(4))
    assert launch.config["model_name_or_path"] == "m"
    assert launch.config["dataset_name"] == "d"
    assert "datasets" not in launch.config
    assert launch.config["reward_model_name_or_path"] == "r"
    assert launch.config["output_dir"] == "/out/run1"
    assert launch.config_path == Path("/out/run1/trlstack-grpo.yaml")
    assert launch.command.argv[3:6] == ["--num_processes", "2", "--multi_gpu"]


def test_extra_arguments_go_to_the_trl_script():
    launch = build_launch(TrainSettings(recipe="grpo", extra=["--seed", "7"]), GRPO, "c", gpus(1))
    assert launch.command.argv[-2:] == ["--seed", "7"]


def test_resume_from_the_newest_checkpoint_unless_the_user_chose_one():
    launch = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(1), checkpoint=Path("o/checkpoint-9"))
    assert launch.config["resume_from_checkpoint"] == "o/checkpoint-9"
    assert "resuming from o/checkpoint-9" in launch.notes
    mine = {**GRPO, "resume_from_checkpoint": "o/checkpoint-3"}
    launch = build_launch(TrainSettings(recipe="grpo"), mine, "c", gpus(1), checkpoint=Path("o/checkpoint-9"))
    assert launch.config["resume_from_checkpoint"] == "o/checkpoint-3"


def test_sharing_the_gpus_with_the_server_names_this_role_a_host_of_its_own_to_nccl():
    plan = make_plan(gpus(1))
    nccl = TrainSettings(recipe="grpo", share_gpus=True, weight_transfer="nccl")
    launch = build_launch(nccl, GRPO, "grpo.yaml", plan.train)
    assert launch.command.env["NCCL_HOSTID"].endswith("-trlstack-train")
    assert any(note.startswith("sharing the GPUs with the server: NCCL_HOSTID=") for note in launch.notes)
    alone = build_launch(TrainSettings(recipe="grpo"), GRPO, "grpo.yaml", plan.train)
    assert "NCCL_HOSTID" not in alone.command.env
    # CUDA IPC, the default where the GPUs are shared, moves no weights over NCCL: no host of its own
    ipc = build_launch(TrainSettings(recipe="grpo", share_gpus=True), GRPO, "grpo.yaml", plan.train)
    assert ipc.command.env["TRLSTACK_WEIGHT_TRANSFER"] == "ipc" and "NCCL_HOSTID" not in ipc.command.env


def test_ranks_per_gpu_runs_that_many_ranks_on_each_gpu_and_tells_the_runner():
    settings = TrainSettings(
        recipe="grpo", ranks_per_gpu=2, sharding="fsdp2", share_gpus=True, weight_transfer="nccl"
    )
    launch = build_launch(settings, GRPO, "grpo.yaml", gpus(1))
    assert launch.processes == 2
    assert launch.accelerate_config is not None and launch.accelerate_config["num_processes"] == 2
    assert launch.command.env["TRLSTACK_RANKS_PER_GPU"] == "2"  # rank/run.py: a host id per rank
    assert launch.command.env["NCCL_HOSTID"].endswith("-trlstack-train")  # the base each rank extends
    assert any(note.startswith("2 training ranks on each GPU") for note in launch.notes)


def test_ranks_sharing_a_gpu_share_its_memory_in_the_estimate():
    small = {
        "model_type": "qwen2", "vocab_size": 1024, "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 2,
    }  # fmt: skip
    big = [Gpu(0, uuid="GPU-0", compute_capability=(9, 0), memory_bytes=80 << 30)]
    alone = build_launch(TrainSettings(recipe="grpo", vllm_mode="server"), GRPO, "g", big, model_config=small)
    shared = build_launch(
        TrainSettings(recipe="grpo", ranks_per_gpu=2, vllm_mode="server"), GRPO, "g", big, model_config=small
    )
    assert any("80.0 GiB per GPU for training" in note for note in alone.notes), alone.notes
    assert any("40.0 GiB per GPU for training" in note for note in shared.notes), shared.notes


# What every rank gets in its environment: the bound on each weight push to vLLM (rank/push_guard.py),
# and with --ranks-per-gpu above 1, how many ranks share a GPU (rank/run.py makes each an NCCL host of
# its own).


def bundled(recipe):
    return yaml.safe_load(RECIPES[recipe].bundled_config.read_text())


@pytest.mark.parametrize("recipe", ["grpo", "rloo", "online-dpo"])
@pytest.mark.parametrize("mode", [None, "colocate"])
def test_every_rank_gets_the_bound_on_its_weight_push(recipe, mode):
    settings = TrainSettings(recipe=recipe, vllm_mode=mode, weight_push_timeout=90.0)
    launch = build_launch(settings, bundled(recipe), "c", gpus(1))
    assert launch.command.env["TRLSTACK_WEIGHT_PUSH_TIMEOUT"] == "90"
    assert (
        "each weight push to vLLM ends the run past 90 s (--weight-push-timeout), every rank naming what it "
        "is stuck in"
    ) in launch.notes
    default = build_launch(TrainSettings(recipe=recipe, vllm_mode=mode), bundled(recipe), "c", gpus(1))
    assert default.command.env["TRLSTACK_WEIGHT_PUSH_TIMEOUT"] == "600"


def test_a_run_without_vllm_gets_no_bound():
    settings = TrainSettings(recipe="grpo", cpu=True, model="org/m", dataset="org/d")
    assert "TRLSTACK_WEIGHT_PUSH_TIMEOUT" not in build_launch(settings, GRPO, "c", []).command.env


def test_ranks_sharing_a_gpu_are_told_how_many_share_it():
    launch = build_launch(
        TrainSettings(recipe="grpo", ranks_per_gpu=2, vllm_mode="server"), GRPO, "c", gpus(1)
    )
    assert launch.command.env["TRLSTACK_RANKS_PER_GPU"] == "2"
    assert launch.command.argv[3:6] == ["--num_processes", "2", "--multi_gpu"]
    shared = "2 training ranks on each GPU: each its own NCCL host"
    assert any(note.startswith(shared) for note in launch.notes)
    # Set when 1 too: the runner reads it, so a value in the shell that a flag overrode must not reach it.
    alone = build_launch(TrainSettings(recipe="grpo"), GRPO, "c", gpus(1))
    assert alone.command.env["TRLSTACK_RANKS_PER_GPU"] == "1"
    assert not any("training ranks on each GPU" in note for note in alone.notes)


def test_a_bound_on_a_push_to_no_vllm_is_refused():
    settings = TrainSettings(recipe="grpo", cpu=True, weight_push_timeout=60.0)
    with pytest.raises(UsageError, match="--cpu runs without vLLM, but --weight-push-timeout"):
        build_launch(settings, GRPO, "c", [])
