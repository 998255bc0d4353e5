"""train: the exact accelerate command and merged config for each layout and mode, the order of side effects,
and bad input that starts nothing (no exec, no file written)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import make_plan
from trlstack.recipes import RECIPES
from trlstack.roles import train
from trlstack.roles.command_line import parse_role
from trlstack.roles.train.checks import check_overlap
from trlstack.roles.train.launch import build_launch
from trlstack.roles.train.settings import ROLE, TrainSettings

GRPO = yaml.safe_load(RECIPES["grpo"].bundled_config.read_text())


def gpus(n, capability=(9, 0)):
    return [Gpu(i, uuid=f"GPU-{i:04d}", compute_capability=capability) for i in range(n)]


def launch_tail(module="trl.scripts.grpo", config="outputs/grpo/trlstack-grpo.yaml"):
    return ["-m", "trlstack.recipes.run", module, "--config", config]


@pytest.mark.parametrize(("machine_gpus", "train_gpus"), [(2, 1), (4, 2), (8, 4)])
def test_exact_command_on_the_plans_training_gpus(machine_gpus, train_gpus):
    plan = make_plan(gpus(machine_gpus))
    launch = build_launch(TrainSettings(recipe="grpo"), GRPO, "grpo.yaml", plan.train)
    multi = ["--multi_gpu"] if train_gpus > 1 else []
    assert launch.command.argv == [
        "accelerate", "launch", "--num_processes", str(train_gpus), *multi,
        "--num_machines", "1", "--mixed_precision", "bf16", "--dynamo_backend", "no",
        *launch_tail(),
    ]  # fmt: skip
    assert launch.command.env == {"VLLM_HOST_IP": "127.0.0.1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert launch.config_path == Path("outputs/grpo/trlstack-grpo.yaml")


def test_server_mode_config_keeps_the_users_keys_and_adds_the_servers():
    settings = TrainSettings(
        recipe="grpo", vllm_url="http://vllm:8000", vllm_group_port=51300, host_ip="trainer"
    )
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
    assert launch.command.env == {"VLLM_HOST_IP": "trainer", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
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
        "trlstack.recipes.online_dpo", "outputs/online-dpo/trlstack-online-dpo.yaml"
    )
    assert dpo.command.env["TRL_EXPERIMENTAL_SILENCE"] == "1"


def test_colocate_mode_needs_no_server():
    launch = build_launch(TrainSettings(recipe="grpo", vllm_mode="colocate"), GRPO, "c", gpus(1))
    assert launch.config["vllm_mode"] == "colocate"
    assert "vllm_server_base_url" not in launch.config
    assert launch.command.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert launch.command.argv[:4] == ["accelerate", "launch", "--num_processes", "1"]


def test_cpu_smoke_is_tiny_fp32_and_without_vllm():
    settings = TrainSettings(recipe="grpo", cpu=True, model="/tmp/m", dataset="/tmp/d")
    launch = build_launch(settings, GRPO, "c", [])
    assert launch.command.argv == [
        "accelerate", "launch", "--cpu", "--num_processes", "1",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *launch_tail(),
    ]  # fmt: skip
    config = launch.config
    assert config["model_name_or_path"] == "/tmp/m"
    assert config["dataset_name"] == "/tmp/d"
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
    settings = TrainSettings(recipe="grpo", cpu=True, model="/tmp/m", dataset="/tmp/d", num_processes=2)
    launch = build_launch(settings, GRPO, "c", [])
    assert launch.command.argv == [
        "accelerate", "launch", "--num_processes", "2", "--multi_gpu",
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
        "accelerate", "launch", "--num_processes", "24", "--multi_gpu",
        "--num_machines", "3", "--mixed_precision", "bf16", "--dynamo_backend", "no",
        "--machine_rank", "2", "--main_process_ip", "10.0.0.2", "--main_process_port", "29500",
        "--rdzv_backend", "static", *launch_tail(),
    ]  # fmt: skip
    assert launch.command.env == {"VLLM_HOST_IP": "10.0.0.4", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
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
        "accelerate", "launch", "--num_processes", "2", "--multi_gpu",
        "--num_machines", "2", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--machine_rank", "1", "--main_process_ip", "node2", "--main_process_port", "29700",
        "--rdzv_backend", "static", *launch_tail(),
    ]  # fmt: skip
    assert launch.command.env == {}


def test_machine_settings_come_from_flags_or_the_environment():
    environ = {
        "TRLSTACK_NUM_MACHINES": "4",
        "TRLSTACK_MACHINE_RANK": "3",
        "TRLSTACK_MAIN_PROCESS_IP": "10.1.0.1",
    }
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo", "--main-process-port", "29600"], environ)
    assert (settings.num_machines, settings.machine_rank) == (4, 3)
    assert (settings.main_process_ip, settings.main_process_port) == ("10.1.0.1", 29600)


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
    assert launch.command.argv[2:5] == ["--num_processes", "2", "--multi_gpu"]


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
    launch = build_launch(TrainSettings(recipe="grpo", share_gpus=True), GRPO, "grpo.yaml", plan.train)
    assert launch.command.env["NCCL_HOSTID"].endswith("-trlstack-train")
    assert any(note.startswith("sharing the GPUs with the server: NCCL_HOSTID=") for note in launch.notes)
    alone = build_launch(TrainSettings(recipe="grpo"), GRPO, "grpo.yaml", plan.train)
    assert "NCCL_HOSTID" not in alone.command.env


def test_a_mig_device_of_a_serving_gpu_overlaps_it():
    machine = gpus(4)
    mig = Gpu(1, "MIG-9d0b3c1e", "A100 MIG 3g.40gb", (8, 0), parent=machine[1].uuid)
    check_overlap([mig], [0], machine)
    with pytest.raises(UsageError, match=r"GPU 1 \(GPU-0001\), which --serve-gpus gives the vLLM server"):
        check_overlap([mig], [1], machine)


def test_overlap_is_judged_by_uuid():
    machine = gpus(4)
    check_overlap(machine[2:], [0, 1], machine)
    with pytest.raises(UsageError, match=r"GPU 1 \(GPU-0001\), which --serve-gpus gives the vLLM server"):
        check_overlap(machine[1:], [0, 1], machine)


# main(): the side effects, in order.


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def run_dir(tmp_path, clean_env):
    clean_env.chdir(tmp_path)
    return tmp_path


def test_main_waits_checks_writes_and_execs(
    run_dir, clean_env, machine, on_path, exec_calls, vllm_server, capsys
):
    machine(gpus(8))
    mine = write(run_dir / "mine.yaml", {**GRPO, "learning_rate": 3e-6})
    vllm_server.health_failures = 1
    on_path("accelerate")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    clean_env.setenv("VLLM_HOST_IP", "127.0.0.2")  # the user's choice of an address of this machine
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--config", str(mine), "--serve-gpus", "0-3", "--health-timeout", "30"])
    [(program, argv, child_env)] = exec_calls
    assert program == "accelerate"
    assert argv == [
        "accelerate", "launch", "--num_processes", "4", "--multi_gpu",
        "--num_machines", "1", "--mixed_precision", "bf16", "--dynamo_backend", "no", *launch_tail(),
    ]  # fmt: skip
    assert child_env["VLLM_HOST_IP"] == "127.0.0.2"
    assert vllm_server.requests == ["/health", "/health", "/server_info?config_format=json"]
    merged = yaml.safe_load((run_dir / "outputs/grpo/trlstack-grpo.yaml").read_text())
    assert merged["learning_rate"] == 3e-6
    assert merged["vllm_server_base_url"] == vllm_server.url
    assert yaml.safe_load(mine.read_text())["learning_rate"] == 3e-6  # the user's file is untouched
    assert not [p for p in (run_dir / "outputs/grpo").iterdir() if p.name.endswith(".tmp")]


def serving(vllm_server, model):
    import json

    config = {"weight_transfer_config": {"backend": "nccl"}, "model_config": {"model": model}}
    vllm_server.server_info = (200, json.dumps({"vllm_config": config}).encode())


def test_a_different_served_model_is_refused_before_training_starts(
    run_dir, clean_env, machine, on_path, no_exec, vllm_server, capsys
):
    machine(gpus(2))
    on_path("accelerate")
    serving(vllm_server, "org/other")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    assert train.main(["grpo", "--model", "org/mine"]) == 1
    err = capsys.readouterr().err
    assert (
        f"train: error: the vLLM server at {vllm_server.url} serves org/other, but this run trains org/mine"
        in err
    )
    assert "TRL's first weight sync would fail" in err and "--allow-other-served-model" in err
    assert not (run_dir / "outputs").exists()


@pytest.mark.parametrize("allow", [["--allow-other-served-model"], ["--allow-other"]])
def test_the_flag_or_its_variable_lets_an_intended_other_name_through(
    run_dir, clean_env, machine, on_path, exec_calls, vllm_server, capsys, allow
):
    machine(gpus(2))
    on_path("accelerate")
    serving(vllm_server, "/models/my-copy")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--model", "org/mine", *allow])
    assert "serves /models/my-copy and this run trains org/mine: allowed by --allow-other-served-model" in (
        capsys.readouterr().err
    )
    clean_env.setenv("TRLSTACK_ALLOW_OTHER_SERVED_MODEL", "1")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--model", "org/mine"])


def test_a_local_copy_of_the_trained_model_is_recognised(
    run_dir, clean_env, machine, on_path, exec_calls, vllm_server, capsys
):
    import json

    for name in ("served", "trained"):
        (run_dir / name).mkdir()
        (run_dir / name / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    machine(gpus(2))
    on_path("accelerate")
    serving(vllm_server, str(run_dir / "served"))
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--model", str(run_dir / "trained")])
    assert "their config.json files agree on the architecture and every size" in capsys.readouterr().err


def test_ctrl_c_while_waiting_exits_130_and_starts_nothing(
    run_dir, clean_env, machine, on_path, no_exec, capsys
):
    from trlstack import health

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    machine(gpus(2))
    on_path("accelerate")
    clean_env.setattr(health, "wait_for_health", interrupted)
    assert train.main(["grpo"]) == 130
    assert "train: interrupted" in capsys.readouterr().err
    assert not (run_dir / "outputs").exists()


def test_main_resumes_and_leaves_incomplete_checkpoints_alone(run_dir, on_path, exec_calls, capsys):
    output = run_dir / "outputs/grpo"
    for step in (2, 10):
        (output / f"checkpoint-{step}").mkdir(parents=True)
        (output / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (output / "checkpoint-12").mkdir()  # a crash while saving
    on_path("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d"])
    err = capsys.readouterr().err
    assert "SMOKE RUN (--cpu)" in err
    assert "resuming from outputs/grpo/checkpoint-10" in err
    assert "checkpoint-12 is incomplete" in err
    merged = yaml.safe_load((output / "trlstack-grpo.yaml").read_text())
    assert merged["resume_from_checkpoint"] == "outputs/grpo/checkpoint-10"
    assert (output / "checkpoint-12").is_dir()


def previous_cpu_run(run_dir, capsys, on_path, exec_calls, *argv):
    """outputs/grpo as a --cpu run on model m and data d left it: its merged config and checkpoint-3."""
    on_path("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d", *argv])
    output = run_dir / "outputs/grpo"
    (output / "checkpoint-3").mkdir()
    (output / "checkpoint-3" / "trainer_state.json").write_text("{}")
    exec_calls.clear()
    capsys.readouterr()
    return output


def test_another_run_in_the_output_folder_is_refused_with_the_difference(
    run_dir, on_path, exec_calls, capsys
):
    output = previous_cpu_run(run_dir, capsys, on_path, exec_calls)
    merged = (output / "trlstack-grpo.yaml").read_text()
    assert train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other"]) == 1
    err = capsys.readouterr().err
    assert "train: error: outputs/grpo holds another run than this one" in err
    assert "    dataset_name: d -> other\n" in err
    assert "--fresh (TRLSTACK_FRESH=1): move it aside to outputs/grpo." in err
    assert "--resume (TRLSTACK_RESUME=1): continue it anyway" in err
    assert not exec_calls and (output / "trlstack-grpo.yaml").read_text() == merged


def test_the_same_run_with_more_steps_resumes_without_asking(run_dir, on_path, exec_calls, capsys):
    previous_cpu_run(run_dir, capsys, on_path, exec_calls)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d", "--", "--max_steps", "9"])
    assert "resuming from outputs/grpo/checkpoint-3" in capsys.readouterr().err


def test_resume_continues_another_run_when_asked(run_dir, clean_env, on_path, exec_calls, capsys):
    previous_cpu_run(run_dir, capsys, on_path, exec_calls)
    clean_env.setenv("TRLSTACK_RESUME", "1")  # as compose passes it from .env
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other"])
    err = capsys.readouterr().err
    assert (
        "continuing the run in outputs/grpo although it differs (--resume): dataset_name: d -> other" in err
    )
    assert "resuming from outputs/grpo/checkpoint-3" in err


def test_fresh_moves_another_run_aside_and_starts_anew(run_dir, on_path, exec_calls, capsys):
    previous_cpu_run(run_dir, capsys, on_path, exec_calls)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other", "--fresh"])
    err = capsys.readouterr().err
    (aside,) = (run_dir / "outputs").glob("grpo.*")
    assert f"moved outputs/grpo to outputs/{aside.name}; nothing in it was changed or deleted" in err
    assert (aside / "checkpoint-3" / "trainer_state.json").is_file()
    assert yaml.safe_load((aside / "trlstack-grpo.yaml").read_text())["dataset_name"] == "d"
    merged = yaml.safe_load((run_dir / "outputs/grpo/trlstack-grpo.yaml").read_text())
    assert merged["dataset_name"] == "other" and "resume_from_checkpoint" not in merged
    assert "resuming" not in err
    # Left set (in .env, say), --fresh does nothing more once the folder holds this run: restarts resume.
    (run_dir / "outputs/grpo/checkpoint-1").mkdir()
    (run_dir / "outputs/grpo/checkpoint-1/trainer_state.json").write_text("{}")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other", "--fresh"])
    assert "resuming from outputs/grpo/checkpoint-1" in capsys.readouterr().err
    assert len(list((run_dir / "outputs").glob("grpo.*"))) == 1


def test_the_smoke_banner_counts_the_steps_the_script_will_take(run_dir, capsys, no_exec):
    assert train.main(["rloo", "--cpu", "--print-command", "--", "--max_steps", "5"]) == 0
    assert "SMOKE RUN (--cpu): no vLLM, fp32 on the CPU, 5 tiny steps." in capsys.readouterr().err


def test_colocate_main_does_not_wait_for_a_server(run_dir, machine, on_path, exec_calls, closed_port):
    machine(gpus(1))
    on_path("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--vllm-mode", "colocate", "--vllm-url", f"http://127.0.0.1:{closed_port}"])
    assert exec_calls[0][1][:4] == ["accelerate", "launch", "--num_processes", "1"]


def test_print_command_shows_command_and_config_and_writes_nothing(run_dir, capsys, no_exec):
    assert train.main(["rloo", "--gpus", "4", "--print-command"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    # A preview for another machine knows no compute capability: what every CUDA 13 GPU runs, and why.
    assert out[0] == (
        "CUDA_DEVICE_ORDER=PCI_BUS_ID VLLM_HOST_IP=127.0.0.1 accelerate launch --num_processes 4 --multi_gpu "
        "--num_machines 1 --mixed_precision fp16 --dynamo_backend no -m trlstack.recipes.run "
        "trl.scripts.rloo --config outputs/rloo/trlstack-rloo.yaml"
    )
    assert "train: precision fp16 (compute capability unknown: fp16, which every GPU" in captured.err
    assert "#   vllm_mode: server" in out
    assert not (run_dir / "outputs").exists()


# Bad input: exit 1, the message, nothing exec'd and no merged config written.

UNREACHABLE = "did not become healthy within 1 s"
BAD_INPUT = [
    (["pretrain"], {}, "unknown recipe 'pretrain'; choose one of grpo, rloo, online-dpo"),
    ([], {}, "name a recipe: train RECIPE, one of grpo, rloo, online-dpo"),
    ([], {"TRLSTACK_RECIPE": "ppo"}, "unknown recipe 'ppo'"),
    (["grpo", "--config", "absent.yaml"], {}, "config file absent.yaml does not exist"),
    (["grpo", "--config", "broken.yaml"], {}, "is not valid YAML at line 3, column 1: expected ',' or ']'"),
    (["grpo", "--config", "list.yaml"], {}, "must be a YAML mapping of TRL config keys"),
    (["grpo", "--config", "typo.yaml"], {}, "learning_rat (did you mean learning_rate?)"),
    (["rloo", "--config", "typo.yaml"], {}, "keys the rloo script does not accept"),
    (["grpo", "--config", "no_model.yaml"], {}, "missing required keys: model_name_or_path (or pass --model"),
    (["grpo", "--config", "no_data.yaml"], {}, "dataset_name or datasets (or pass --dataset"),
    (["online-dpo", "--config", "no_data.yaml"], {}, "reward_model_path or reward_funcs"),
    (["grpo", "--config", "bad_kwargs.yaml"], {}, "model_init_kwargs must be a mapping"),
    (["grpo"], {"CUDA_VISIBLE_DEVICES": ""}, "train needs a CUDA GPU and none is visible"),
    (
        ["grpo", "--serve-gpus", "0"],
        {"CUDA_VISIBLE_DEVICES": "-1"},
        "train needs a CUDA GPU and none is visible",
    ),
    (["grpo", "--health-timeout", "1"], {"TRLSTACK_VLLM_URL": "closed"}, UNREACHABLE),
    (["grpo", "--health-timeout", "1"], {"TRLSTACK_VLLM_URL": "closed"}, "raise --health-timeout"),
    (["grpo"], {"TRLSTACK_VLLM_URL": "no_weight_transfer"}, "has no weight-transfer engine"),
    (["grpo"], {"TRLSTACK_VLLM_URL": "no_dev_mode"}, "Restart it with VLLM_SERVER_DEV_MODE=1"),
    (
        ["grpo", "--serve-gpus", "0-1"],
        {"CUDA_VISIBLE_DEVICES": "1,2"},
        "which --serve-gpus gives the vLLM server",
    ),
    (
        ["grpo", "--serve-gpus", "0-1"],
        {"CUDA_VISIBLE_DEVICES": "1,2"},
        "or share the GPUs on purpose with --share-gpus (TRLSTACK_SHARE_GPUS=1)",
    ),
    (
        ["grpo", "--share-gpus", "--vllm-mode", "colocate"],
        {},
        "this is a colocate run, which starts no server",
    ),
    (["grpo", "--cpu"], {"TRLSTACK_SHARE_GPUS": "1"}, "--share-gpus (TRLSTACK_SHARE_GPUS) runs the trainer"),
    (["grpo"], {"TRLSTACK_SHARE_GPUS": "maybe"}, "TRLSTACK_SHARE_GPUS='maybe' is not valid for --share-gpus"),
    (["grpo", "--serve-gpus", "6"], {"CUDA_VISIBLE_DEVICES": "2,3"}, "--serve-gpus names GPU 6"),
    (
        ["grpo", "--serve-gpus", "0-"],
        {"CUDA_VISIBLE_DEVICES": "2,3"},
        "argument --serve-gpus: '0-': '0-' is not",
    ),
    (["grpo"], {"TRLSTACK_SERVE_GPUS": "0-"}, "TRLSTACK_SERVE_GPUS='0-' is not valid for --serve-gpus"),
    (["grpo", "--cpu", "--vllm-mode", "server"], {}, "--cpu runs without vLLM, but --vllm-mode server"),
    (["grpo", "--cpu"], {"TRLSTACK_VLLM_MODE": "colocate"}, "--cpu runs without vLLM"),
    (["grpo", "--num-processes", "3"], {"CUDA_VISIBLE_DEVICES": "0,1"}, "--num-processes 3 needs a GPU each"),
    (["grpo", "--vllm-mode", "remote"], {}, "'remote' is not one of server, colocate"),
    (["grpo"], {"TRLSTACK_HEALTH_TIMEOUT": "soon"}, "TRLSTACK_HEALTH_TIMEOUT='soon' is not valid"),
    (["grpo"], {"TRLSTACK_HEALTH_TIMEOUT": "-5"}, "TRLSTACK_HEALTH_TIMEOUT='-5' is not valid"),
    (["grpo"], {"TRLSTACK_VLLM_URL": "localhost:8000"}, "is not an http(s)://HOST:PORT URL"),
    (["grpo"], {"TRLSTACK_VLLM_GROUP_PORT": "0"}, "TRLSTACK_VLLM_GROUP_PORT='0' is not valid"),
    (["grpo", "--vllm-group-port", "8000"], {}, "is the server's HTTP port in --vllm-url"),
    (["grpo"], {"TRLSTACK_CPU": "perhaps"}, "TRLSTACK_CPU='perhaps' is not valid for --cpu"),
    (["grpo"], {"VLLM_HOST_IP": "http://10.0.0.1"}, "is not an IP address or host name"),
    # A server on another host cannot reach the trainer at 127.0.0.1: refused before the wait.
    (
        ["grpo", "--vllm-url", "http://10.255.0.7:8000"],
        {"VLLM_HOST_IP": "127.0.0.1"},
        "is 127.0.0.1, this machine's loopback, but the vLLM server at http://10.255.0.7:8000 is on "
        "10.255.0.7",
    ),
    (
        ["grpo", "--vllm-url", "http://10.255.0.7:8000", "--host-ip", "localhost"],
        {},
        "this machine's loopback",
    ),
    (["grpo", "--host-ip", "192.0.2.1"], {}, "192.0.2.1, which is not an address of this machine"),
    (
        ["grpo", "--vllm-url", "http://no-such-host.invalid:8000"],
        {},
        "no route from this machine to the vLLM",
    ),
    (["grpo", "--gpus", "2"], {}, "--gpus N only describes another machine"),
    (["grpo"], {"CUDA_VISIBLE_DEVICES": "GPU-nope"}, "CUDA_VISIBLE_DEVICES='GPU-nope'"),
    (
        ["grpo"],
        {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
        "CUDA_DEVICE_ORDER=FASTEST_FIRST numbers GPUs differently",
    ),
    (["grpo"], {"CUDA_VISIBLE_DEVICES": "MIG-9d0b"}, "MIG-9d0b matches no GPU (no GPU here is in MIG mode)"),
    (["grpo", "--cpu", "--config", "no_model.yaml"], {}, "missing required keys"),
    (["grpo", "--cpu"], {"PATH": ""}, "`accelerate` is not on PATH"),
    (["grpo", "--", "--output_dir", "/x"], {}, "--output_dir after `--` would override train's setting"),
    (["grpo", "--", "--vllm_server_base_url=http://x:1"], {}, "use --vllm-url"),
    (["grpo", "--", "--fp16", "true"], {}, "use bf16/fp16 in the config file"),
    (["grpo", "--", "--enable-jit-checkpoint"], {}, "train saves a checkpoint when stopped"),
    (["grpo", "--resume", "--fresh"], {}, "--resume continues the other run in the output folder, --fresh"),
    (
        ["grpo", "--cpu"],
        {"TRLSTACK_OUTPUT_DIR": "a_file/grpo"},
        "a_file is a file. Choose another --output-dir",
    ),
    # The imposed TRL settings by meaning: both spellings, `=` forms, abbreviations TRL's parser accepts.
    (["grpo", "--", "--output-dir", "/x"], {}, "--output-dir after `--` would override train's setting"),
    (["grpo", "--", "--output-d=/x"], {}, "(the grpo script reads it as --output-dir); use --output-dir"),
    (["grpo", "--", "--outp", "/x"], {}, "--outp after `--` would override train's setting"),
    (["grpo", "--", "--use-vllm", "false"], {}, "use --cpu for a run without vLLM"),
    (["grpo", "--", "--vllm_mod", "colocate"], {}, "use --vllm-mode"),
    (["grpo", "--", "--vllm-server-base-url", "http://x:1"], {}, "use --vllm-url"),
    (["grpo", "--", "--vllm_group=1"], {}, "use --vllm-group-port"),
    (["grpo", "--", "--bf16=false"], {}, "use bf16/fp16 in the config file"),
    (["grpo", "--", "--config", "other.yaml"], {}, "use --config (before `--`)"),
    # A TRL key the recipe's script does not have fails now, not after the wait for the server.
    (
        ["grpo", "--", "--learnig_rate", "1e-6"],
        {},
        "the grpo script has no option --learnig_rate (after `--`) (did you mean --learning_rate?)",
    ),
    (
        ["online-dpo", "--", "--num_generations", "4"],
        {},
        "the online-dpo script has no option --num_generations",
    ),
    (
        ["rloo", "--", "--vllm-server_base_url", "x"],
        {},
        "the rloo script has no option --vllm-server_base_url",
    ),
    (["grpo", "--", "--save", "5"], {}, "--save after `--` is ambiguous for the grpo script"),
    (["grpo", "--config", "dashed.yaml"], {}, "learning-rate (did you mean learning_rate?)"),
    # Several machines: a rank below their count, and a rank-0 address the others can dial.
    (
        ["grpo", "--num-machines", "2", "--machine-rank", "2"],
        {},
        "--machine-rank 2 (TRLSTACK_MACHINE_RANK) is",
    ),
    (["grpo", "--num-machines", "2"], {}, "--num-machines 2 needs --main-process-ip"),
    (["grpo", "--machine-rank", "-1"], {}, "-1 is not a rank (0 or more)"),
    (["grpo"], {"TRLSTACK_NUM_MACHINES": "0"}, "TRLSTACK_NUM_MACHINES='0' is not valid"),
    (["grpo"], {"TRLSTACK_MACHINE_RANK": "1"}, "--machine-rank 1 (TRLSTACK_MACHINE_RANK) is not below"),
    (["grpo"], {"TRLSTACK_MAIN_PROCESS_PORT": "70000"}, "TRLSTACK_MAIN_PROCESS_PORT='70000' is not valid"),
    *[
        (["grpo", "--cpu", "--num-machines", "2", "--main-process-ip", address], {}, "every machine reads as")
        for address in ("127.0.0.1", "localhost", "0.0.0.0", "0", "::", "::ffff:0.0.0.0", "[::1]")
    ],
    # The trainer's address for the weight transfer is never the any-address, however written.
    *[
        (["grpo", "--host-ip", address], {}, f"--host-ip (VLLM_HOST_IP) is {address}, the any-address")
        for address in ("0.0.0.0", "0", "::", "::ffff:0.0.0.0", "0x0")
    ],
]

CONFIGS = {
    "broken.yaml": "model_name_or_path: m\nreward_funcs: [accuracy_reward\n",
    "list.yaml": "- model_name_or_path\n- dataset_name\n",
    "typo.yaml": "model_name_or_path: m\ndataset_name: d\nreward_funcs: [a]\nlearning_rat: 0.1\n",
    "no_model.yaml": "dataset_name: d\nreward_funcs: [accuracy_reward]\n",
    "no_data.yaml": "model_name_or_path: m\n",
    "bad_kwargs.yaml": "model_name_or_path: m\ndataset_name: d\nreward_funcs: [a]\nmodel_init_kwargs: [1]\n",
    "dashed.yaml": "model_name_or_path: m\ndataset_name: d\nreward_funcs: [a]\nlearning-rate: 0.1\n",
}


@pytest.mark.parametrize(("argv", "env", "message"), BAD_INPUT)
def test_bad_input_exits_1_with_the_fix_and_starts_nothing(
    run_dir, clean_env, machine, on_path, capsys, no_exec, vllm_server, closed_port, argv, env, message
):
    import json

    machine(gpus(4))
    for name, text in CONFIGS.items():
        (run_dir / name).write_text(text)
    (run_dir / "a_file").write_text("")
    servers = {"closed": f"http://127.0.0.1:{closed_port}"}
    servers["no_weight_transfer"] = servers["no_dev_mode"] = vllm_server.url
    if env.get("TRLSTACK_VLLM_URL") == "no_weight_transfer":
        body = {"vllm_config": {"weight_transfer_config": None}}
        vllm_server.server_info = (200, json.dumps(body).encode())
    if env.get("TRLSTACK_VLLM_URL") == "no_dev_mode":
        vllm_server.server_info = (404, b'{"detail": "Not Found"}')
    clean_env.setenv("PATH", str(run_dir))
    on_path("accelerate")  # a stand-in that never runs: exec is refused
    clean_env.setenv("TRLSTACK_HEALTH_TIMEOUT", "3")  # a check that waited for the server first would fail
    for name, value in env.items():
        clean_env.setenv(name, servers.get(value, value))
    assert train.main(argv) == 1
    err = capsys.readouterr().err
    assert "train: error: " in err
    assert message in err
    assert not list(run_dir.glob("outputs/**/trlstack-*.yaml"))


def test_a_typo_after_the_double_dash_fails_before_the_server_is_asked(
    run_dir, clean_env, machine, on_path, capsys, no_exec, vllm_server
):
    machine(gpus(2))
    on_path("accelerate")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    assert train.main(["grpo", "--", "--max_step", "5", "--per_device_train_batch_sise", "8"]) == 1
    assert "has no option --per_device_train_batch_sise" in capsys.readouterr().err
    assert vllm_server.requests == []  # refused at once, not after the health wait


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc on this system")
def test_an_output_folder_under_proc_exits_1_before_anything_starts(run_dir, on_path, no_exec, capsys):
    on_path("accelerate")
    assert train.main(["grpo", "--cpu", "--output-dir", "/proc/x"]) == 1
    err = capsys.readouterr().err
    assert "train: error: cannot make the output folder /proc/x" in err and "--output-dir" in err


def test_gpus_shared_on_purpose_with_the_server_are_not_refused(run_dir, clean_env, machine, capsys, no_exec):
    machine(gpus(1))
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "0")
    clean_env.setenv("TRLSTACK_SERVE_GPUS", "0")  # as compose passes a shared plan
    assert train.main(["grpo", "--print-command"]) == 1
    assert "or share the GPUs on purpose with --share-gpus" in capsys.readouterr().err
    clean_env.setenv("TRLSTACK_SHARE_GPUS", "1")
    assert train.main(["grpo", "--print-command"]) == 0
    assert "NCCL_HOSTID=" in capsys.readouterr().out
