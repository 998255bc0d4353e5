"""trlstack.roles.train.main: the order of side effects (wait, check, write, exec), the preview, and bad input
that starts nothing (no exec, no file written)."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from launch_harness import GRPO, gpus, launch_tail
from trlstack.commands.tiny import MODEL_SHAPE
from trlstack.roles import train
from trlstack.run.launch import LAUNCHER


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def test_main_waits_checks_writes_and_execs(
    run_dir, clean_env, machine, installed, exec_calls, vllm_server, capsys
):
    machine(gpus(8))
    mine = write(run_dir / "mine.yaml", {**GRPO, "learning_rate": 3e-6})
    vllm_server.health_failures = 1
    installed("accelerate")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    clean_env.setenv("VLLM_HOST_IP", "127.0.0.2")  # the user's choice of an address of this machine
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--config", str(mine), "--serve-gpus", "0-3", "--health-timeout", "30"])
    [(program, argv, child_env)] = exec_calls
    assert program == LAUNCHER[0]
    assert argv == [
        *LAUNCHER, "--num_processes", "4", "--multi_gpu",
        "--num_machines", "1", "--mixed_precision", "bf16", "--dynamo_backend", "no", *launch_tail(),
    ]  # fmt: skip
    assert child_env["VLLM_HOST_IP"] == "127.0.0.2"
    assert vllm_server.requests == ["/health", "/health", "/server_info?config_format=json"]
    merged = yaml.safe_load((run_dir / "outputs/grpo/trlstack-grpo.yaml").read_text())
    assert merged["learning_rate"] == 3e-6
    assert merged["vllm_server_base_url"] == vllm_server.url
    assert yaml.safe_load(mine.read_text())["learning_rate"] == 3e-6  # the user's file is untouched
    assert not [p for p in (run_dir / "outputs/grpo").iterdir() if p.name.endswith(".tmp")]


def test_ctrl_c_while_waiting_exits_130_and_starts_nothing(
    run_dir, clean_env, machine, installed, no_exec, capsys
):
    from trlstack.roles.train import health

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    machine(gpus(2))
    installed("accelerate")
    clean_env.setattr(health, "wait_for_health", interrupted)
    assert train.main(["grpo"]) == 130
    assert "train: interrupted" in capsys.readouterr().err
    assert not (run_dir / "outputs").exists()


# trlstack tiny's: 358,784 parameters, 4.3 MB of float32 weights and AdamW moments (its tokenizer: 490 tokens)
TINY_MODEL = {"model_type": "qwen2", "vocab_size": 490, **MODEL_SHAPE}


def tiny_model(folder: Path) -> Path:
    """A model folder as the task check reads one: config.json, a tokenizer and weights (not loaded here)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_MODEL))
    for part in ("tokenizer.json", "model.safetensors"):
        (folder / part).write_text("{}")
    return folder


def test_an_output_folder_without_room_for_one_checkpoint_is_refused_before_anything_starts(
    run_dir, installed, no_exec, capsys, monkeypatch
):
    from trlstack.run import space

    monkeypatch.setattr(space, "free_space", lambda folder: 3_100_000)  # the disk is the boundary here
    installed("accelerate")
    model = tiny_model(run_dir / "tiny")
    assert train.main(["grpo", "--cpu", "--model", str(model), "--dataset", "d"]) == 1
    err = capsys.readouterr().err
    assert (
        "train: error: outputs/grpo has 3.1 MB free, and one checkpoint of this run takes at least 4.3 MB"
        in err
    )
    assert "choose another --output-dir (TRLSTACK_OUTPUT_DIR)" in err
    assert not (run_dir / "outputs").exists()


def test_where_a_checkpoints_size_is_unknown_train_says_so_and_starts(run_dir, installed, exec_calls, capsys):
    installed("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "org/not-here", "--dataset", "d"])
    err = capsys.readouterr().err
    assert (
        "train: cannot tell how much room a checkpoint needs (the model's config.json is not readable" in err
    )
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", str(tiny_model(run_dir / "tiny")), "--dataset", "d"])
    assert "how much room" not in capsys.readouterr().err  # counted, and the disk has room


def test_a_merged_config_the_disk_cannot_take_is_a_message_not_a_traceback(
    run_dir, installed, no_exec, capsys, monkeypatch
):
    import errno

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    # the package's `main` is the function; its module, where the write happens:
    monkeypatch.setattr(sys.modules["trlstack.roles.train.main"], "write_atomically", full)
    installed("accelerate")
    assert train.main(["grpo", "--cpu", "--model", "org/not-here", "--dataset", "d"]) == 1
    err = capsys.readouterr().err
    assert (
        "train: error: cannot write outputs/grpo/trlstack-grpo.yaml: No space left on device; free space"
        in err
    )


def test_a_restart_after_the_last_step_trains_nothing_and_says_so(run_dir, installed, exec_calls, capsys):
    # transformers resumed from the last step would train one more (checkpoint-41 of 40); a restart policy
    # or a resubmitted job starts train again there
    last = run_dir / "outputs/grpo/checkpoint-40"
    last.mkdir(parents=True)
    (last / "trainer_state.json").write_text('{"global_step": 40, "max_steps": 40}')
    installed("accelerate")
    argv = ["grpo", "--cpu", "--model", "m", "--dataset", "d", "--", "--max_steps", "40"]
    assert train.main(argv) == 0
    err = capsys.readouterr().err
    assert "outputs/grpo/checkpoint-40 is step 40, where this run ends: nothing left to train" in err
    assert sorted(path.name for path in last.parent.iterdir()) == ["checkpoint-40"]  # nothing written
    for spelled in (["--max-steps=40"], ["--max_st", "40"]):  # as TRL's parser reads them too
        assert train.main([*argv[:-3], "--", *spelled]) == 0
        assert "nothing left to train" in capsys.readouterr().err
    with pytest.raises(exec_calls.Execd):  # raised, the run goes on from there
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d", "--", "--max_steps", "41"])
    assert "resuming from outputs/grpo/checkpoint-40" in capsys.readouterr().err


def test_main_resumes_and_leaves_incomplete_checkpoints_alone(run_dir, installed, exec_calls, capsys):
    output = run_dir / "outputs/grpo"
    for step in (2, 10):
        (output / f"checkpoint-{step}").mkdir(parents=True)
        (output / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (output / "checkpoint-12").mkdir()  # a crash while saving
    installed("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d"])
    err = capsys.readouterr().err
    assert "SMOKE RUN (--cpu)" in err
    assert "resuming from outputs/grpo/checkpoint-10" in err
    assert "checkpoint-12 is incomplete" in err
    merged = yaml.safe_load((output / "trlstack-grpo.yaml").read_text())
    assert merged["resume_from_checkpoint"] == "outputs/grpo/checkpoint-10"
    assert (output / "checkpoint-12").is_dir()


def test_the_smoke_banner_counts_the_steps_the_script_will_take(run_dir, capsys, no_exec):
    for spelled in (["--max_steps", "5"], ["--max-steps=5"], ["--max_st", "5"]):  # TRL's parser reads each
        assert train.main(["rloo", "--cpu", "--print-command", "--", *spelled]) == 0
        assert "SMOKE RUN (--cpu): no vLLM, fp32 on the CPU, 5 tiny steps." in capsys.readouterr().err


def test_colocate_main_does_not_wait_for_a_server(run_dir, machine, installed, exec_calls, closed_port):
    machine(gpus(1))
    installed("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--vllm-mode", "colocate", "--vllm-url", f"http://127.0.0.1:{closed_port}"])
    assert exec_calls[0][1][:5] == [*LAUNCHER, "--num_processes", "1"]


def test_print_command_shows_command_and_config_and_writes_nothing(run_dir, capsys, no_exec):
    assert train.main(["rloo", "--gpus", "4", "--print-command"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    # A preview for another machine knows no compute capability: what every CUDA 13 GPU runs, and why.
    assert out[0] == (
        "CUDA_DEVICE_ORDER=PCI_BUS_ID TRACKIO_DIR=outputs/rloo/trackio TRLSTACK_RANKS_PER_GPU=1 "
        "TRLSTACK_WEIGHT_PUSH_TIMEOUT=600 "
        f"TRLSTACK_WEIGHT_TRANSFER=nccl VLLM_HOST_IP=127.0.0.1 {shlex.join(LAUNCHER)} --num_processes 4 "
        "--multi_gpu --num_machines 1 --mixed_precision fp16 --dynamo_backend no -m trlstack.rank.run "
        "trl.scripts.rloo --config outputs/rloo/trlstack-rloo.yaml"
    )
    assert "train: precision fp16 (compute capability unknown: fp16, which every GPU" in captured.err
    assert "#   vllm_mode: server" in out
    assert not (run_dir / "outputs").exists()


# Bad input: exit 1, the message, nothing exec'd and no merged config written.

UNREACHABLE = "did not become healthy within 1 s"

BAD_INPUT = [
    (["pretrain"], {}, "argument recipe: 'pretrain' is not one of grpo, rloo, online-dpo, async-grpo"),
    ([], {}, "name a recipe: train RECIPE, one of grpo, rloo, online-dpo"),
    ([], {"TRLSTACK_RECIPE": "ppo"}, "TRLSTACK_RECIPE='ppo' is not valid for RECIPE: 'ppo' is not one of"),
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
    (
        ["grpo", "--num-processes", "3"],
        {"CUDA_VISIBLE_DEVICES": "0,1"},
        "--num-processes 3 (TRLSTACK_NUM_PROCESSES) needs a GPU each, but CUDA_VISIBLE_DEVICES=0,1 has 2",
    ),
    (
        ["grpo", "--num-processes", "5", "--ranks-per-gpu", "2"],
        {"CUDA_VISIBLE_DEVICES": "0,1"},
        "--num-processes 5 (TRLSTACK_NUM_PROCESSES) needs a GPU for every 2",
    ),
    (["grpo"], {"TRLSTACK_RANKS_PER_GPU": "0"}, "TRLSTACK_RANKS_PER_GPU='0' is not valid"),
    (["grpo", "--ranks-per-gpu", "two"], {}, "argument --ranks-per-gpu"),
    (["grpo", "--cpu", "--ranks-per-gpu", "2"], {}, "several ranks on each GPU, but --cpu trains on none"),
    (
        ["grpo", "--vllm-mode", "colocate"],
        {"TRLSTACK_RANKS_PER_GPU": "2"},
        "give each engine a fixed KV cache with --vllm-kv-cache-gib (TRLSTACK_VLLM_KV_CACHE_GIB)",
    ),
    (
        ["grpo", "--vllm-kv-cache-gib", "2"],
        {},
        "fixes the KV cache of the vLLM engine inside each trainer (--vllm-mode colocate), but in server "
        "mode the server sizes its own",
    ),
    (["grpo", "--cpu"], {"TRLSTACK_VLLM_KV_CACHE_GIB": "2"}, "but --cpu runs without vLLM; drop it"),
    (
        ["grpo", "--vllm-mode", "colocate"],
        {"TRLSTACK_VLLM_KV_CACHE_GIB": "0"},
        "TRLSTACK_VLLM_KV_CACHE_GIB='0' is not valid",
    ),
    (["grpo", "--vllm-mode", "colocate", "--vllm-kv-cache-gib", "nan"], {}, "argument --vllm-kv-cache-gib"),
    (["grpo", "--vllm-mode", "remote"], {}, "'remote' is not one of server, colocate"),
    (["grpo"], {"TRLSTACK_HEALTH_TIMEOUT": "soon"}, "TRLSTACK_HEALTH_TIMEOUT='soon' is not valid"),
    (["grpo"], {"TRLSTACK_HEALTH_TIMEOUT": "-5"}, "TRLSTACK_HEALTH_TIMEOUT='-5' is not valid"),
    (["grpo"], {"TRLSTACK_VLLM_URL": "localhost:8000"}, "is not an http(s)://HOST:PORT URL"),
    (["grpo"], {"TRLSTACK_VLLM_GROUP_PORT": "0"}, "TRLSTACK_VLLM_GROUP_PORT='0' is not valid"),
    (["grpo", "--group-port", "8000"], {}, "the port of --vllm-url and --group-port are both 8000"),
    (
        ["grpo", "--vllm-group-port", "8000"],
        {},
        "--vllm-group-port is now --group-port (TRLSTACK_VLLM_GROUP_PORT",
    ),
    (
        ["grpo", "--vllm-group-port=5"],
        {},
        "the name plan, doctor and trlstack slurm take too; write --group-port=5",
    ),
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
    (["grpo", "--", "--vllm_group=1"], {}, "use --group-port"),
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
    run_dir, clean_env, machine, installed, capsys, no_exec, vllm_server, closed_port, argv, env, message
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
    installed("accelerate")  # a stand-in that never runs: exec is refused
    clean_env.setenv("TRLSTACK_HEALTH_TIMEOUT", "3")  # a check that waited for the server first would fail
    for name, value in env.items():
        clean_env.setenv(name, servers.get(value, value))
    assert train.main(argv) == 1
    err = capsys.readouterr().err
    assert "train: error: " in err
    assert message in err
    assert not list(run_dir.glob("outputs/**/trlstack-*.yaml"))


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is not None, reason="accelerate is installed here")
def test_a_python_without_accelerate_is_named_before_anything_starts(run_dir, clean_env, capsys, no_exec):
    assert train.main(["grpo", "--cpu"]) == 1
    err = capsys.readouterr().err
    assert (
        f"train: error: `accelerate` is not installed for {sys.executable}: run it in the trlstack image"
        in err
    )
    assert "`uv sync --extra gpu`" in err
    assert not list(run_dir.glob("outputs/**/trlstack-*.yaml"))


def test_a_typo_after_the_double_dash_fails_before_the_server_is_asked(
    run_dir, clean_env, machine, installed, capsys, no_exec, vllm_server
):
    machine(gpus(2))
    installed("accelerate")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    assert train.main(["grpo", "--", "--max_step", "5", "--per_device_train_batch_sise", "8"]) == 1
    assert "has no option --per_device_train_batch_sise" in capsys.readouterr().err
    assert vllm_server.requests == []  # refused at once, not after the health wait


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc on this system")
def test_an_output_folder_under_proc_exits_1_before_anything_starts(run_dir, installed, no_exec, capsys):
    installed("accelerate")
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
    assert "TRLSTACK_WEIGHT_TRANSFER=ipc" in capsys.readouterr().out  # CUDA IPC where the GPUs are shared
    clean_env.setenv("TRLSTACK_WEIGHT_TRANSFER", "nccl")
    assert train.main(["grpo", "--print-command"]) == 0
    assert "NCCL_HOSTID=" in capsys.readouterr().out
