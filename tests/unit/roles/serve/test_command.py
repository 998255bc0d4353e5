"""serve-vllm: the exact vLLM command for each GPU layout, the bind policy, bad input that starts nothing."""

from __future__ import annotations

import shlex

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import make_plan
from trlstack.roles.serve import command as serve
from trlstack.roles.serve.command import build_command, check_bind
from trlstack.roles.serve.settings import ServeSettings

SEED_COMMAND = [
    "vllm",
    "serve",
    "Qwen/Qwen2.5-0.5B-Instruct",
    "--weight-transfer-config",
    '{"backend": "nccl"}',
    "--logprobs-mode",
    "processed_logprobs",
    "--max-logprobs",
    "-1",
]


def gpus(n):
    return [Gpu(i, uuid=f"GPU-{i:04d}", compute_capability=(9, 0)) for i in range(n)]


@pytest.mark.parametrize(("machine_gpus", "serve_gpus"), [(2, 1), (4, 2), (8, 4)])
def test_exact_command_on_the_plans_serving_gpus(machine_gpus, serve_gpus):
    plan = make_plan(gpus(machine_gpus))
    command = build_command(ServeSettings(), plan.serve)
    assert command.argv == [
        *SEED_COMMAND,
        "--host", "127.0.0.1",
        "--port", "8000",
        "--tensor-parallel-size", "1",
        "--data-parallel-size", str(serve_gpus),
        "--gpu-memory-utilization", "0.9",
    ]  # fmt: skip
    # CUDA numbers GPUs as nvidia-smi and the plan do only in PCI bus order, whoever starts the role; vLLM's
    # own top-k/top-p sampler, as FlashInfer's would compile kernels the shipped wheels cannot build.
    assert command.env == {
        "VLLM_SERVER_DEV_MODE": "1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
    }


def test_sharing_the_gpus_over_nccl_names_this_role_a_host_of_its_own_and_leaves_the_trainer_memory():
    command = build_command(ServeSettings(share_gpus=True, weight_transfer="nccl"), gpus(1))
    assert command.env["NCCL_HOSTID"].endswith("-trlstack-serve")
    assert command.argv[3:5] == ["--weight-transfer-config", '{"backend": "nccl"}']
    assert command.argv[-2:] == ["--gpu-memory-utilization", "0.3"]
    chosen = build_command(ServeSettings(share_gpus=True, gpu_memory_utilization=0.5), gpus(1))
    assert chosen.argv[-2:] == ["--gpu-memory-utilization", "0.5"]
    assert "NCCL_HOSTID" not in build_command(ServeSettings(), gpus(1)).env


def test_sharing_the_gpus_takes_the_cuda_ipc_engine_and_lets_vllm_unpickle_its_handles():
    command = build_command(ServeSettings(share_gpus=True), gpus(2))
    assert command.argv[3:9] == [
        "--weight-transfer-config", '{"backend": "trlstack-ipc"}',
        "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1",
    ]  # fmt: skip
    assert command.env["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "1"
    assert "NCCL_HOSTID" not in command.env  # no NCCL group across the two roles to tell apart
    assert command.argv[-2:] == ["--gpu-memory-utilization", "0.3"]
    for settings in (ServeSettings(), ServeSettings(share_gpus=True, weight_transfer="nccl")):
        assert "VLLM_ALLOW_INSECURE_SERIALIZATION" not in build_command(settings, gpus(1)).env


def test_cuda_ipc_on_gpus_the_trainer_does_not_share_is_refused():
    with pytest.raises(UsageError, match="must run on the same GPUs: add --share-gpus"):
        build_command(ServeSettings(weight_transfer="ipc"), gpus(1))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_the_cuda_ipc_server_binds_loopback(host):
    check_bind(host, allow_public=False, transfer="ipc")
    check_bind(host, allow_public=True, transfer="ipc")


@pytest.mark.parametrize(
    ("host", "said"),
    [("0.0.0.0", "binds every interface"), ("::", "binds every interface"),
     ("10.1.2.3", "binds 10.1.2.3, which is not loopback"), ("8.8.8.8", "binds 8.8.8.8, which is not")],
)  # fmt: skip
@pytest.mark.parametrize("allow_public", [False, True])
def test_the_cuda_ipc_server_refuses_any_other_bind_even_when_public_binds_are_allowed(
    host, said, allow_public
):
    with pytest.raises(UsageError) as error:
        check_bind(host, allow_public=allow_public, transfer="ipc")
    message = str(error.value)
    assert said in message and "unpickles" in message and "even with --allow-public-bind" in message
    assert "--weight-transfer nccl" in message


def test_a_name_is_loopback_for_cuda_ipc_only_when_every_address_it_stands_for_is():
    check_bind("trainer-host", False, resolve=lambda name: ["127.0.1.1"], transfer="ipc")
    with pytest.raises(UsageError, match="binds 172.20.0.3, which is not loopback"):
        check_bind("vllm", False, resolve=lambda name: ["127.0.0.1", "172.20.0.3"], transfer="ipc")


@pytest.mark.parametrize("yes", ["1", "true", "YES", "on"])
def test_sharing_is_read_from_the_environment_as_compose_writes_it(clean_env, capsys, no_exec, yes):
    clean_env.setenv("TRLSTACK_SHARE_GPUS", yes)
    assert serve.main(["--gpus", "1", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert """{"backend": "trlstack-ipc"}""" in out and "--gpu-memory-utilization 0.3" in out
    clean_env.setenv("TRLSTACK_WEIGHT_TRANSFER", "nccl")
    assert serve.main(["--gpus", "1", "--print-command"]) == 0
    assert "NCCL_HOSTID=" in capsys.readouterr().out


def test_eight_gpus_with_tensor_parallel_two_and_every_option():
    settings = ServeSettings(
        model="/models/qwen",
        host="10.0.0.5",
        port=8100,
        tensor_parallel_size=2,
        gpu_memory_utilization=0.8,
        max_model_len=4096,
        dtype="bfloat16",
        extra=["--enforce-eager", "--seed", "3"],
    )
    command = build_command(settings, gpus(8))
    assert command.argv == [
        "vllm", "serve", "/models/qwen", *SEED_COMMAND[3:],
        "--host", "10.0.0.5",
        "--port", "8100",
        "--tensor-parallel-size", "2",
        "--data-parallel-size", "4",
        "--gpu-memory-utilization", "0.8",
        "--max-model-len", "4096",
        "--dtype", "bfloat16",
        "--enforce-eager", "--seed", "3",
    ]  # fmt: skip


def test_shell_form_is_the_seed_line_and_reparses_to_the_same_argv():
    command = build_command(ServeSettings(), gpus(1))
    line = command.shell()
    assert line.startswith(
        "CUDA_DEVICE_ORDER=PCI_BUS_ID VLLM_SERVER_DEV_MODE=1 VLLM_USE_FLASHINFER_SAMPLER=0 vllm serve "
        "Qwen/Qwen2.5-0.5B-Instruct "
        """--weight-transfer-config '{"backend": "nccl"}' """
        "--logprobs-mode processed_logprobs --max-logprobs -1"
    )
    assert shlex.split(line) == [
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "VLLM_SERVER_DEV_MODE=1",
        "VLLM_USE_FLASHINFER_SAMPLER=0",
        *command.argv,
    ]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "10.1.2.3", "172.18.0.2", "192.168.1.20", "fd00::5"])
def test_loopback_and_private_binds_are_allowed(host):
    check_bind(host, allow_public=False)


def test_a_host_name_is_judged_by_the_addresses_it_resolves_to():
    check_bind("vllm", allow_public=False, resolve=lambda name: ["172.20.0.3"])
    with pytest.raises(UsageError, match="public address 8.8.4.4"):
        check_bind("vllm", allow_public=False, resolve=lambda name: ["172.20.0.3", "8.8.4.4"])


@pytest.mark.parametrize("resolved", [["0.0.0.0"], ["::"], ["::ffff:0.0.0.0"], ["127.0.0.1", "0.0.0.0"]])
def test_a_host_name_for_the_any_address_is_every_interface(resolved):
    with pytest.raises(UsageError, match="binds the server on every interface"):
        check_bind("anywhere", allow_public=False, resolve=lambda name: resolved)


def test_localhost_resolves_for_real():
    check_bind("localhost", allow_public=False)


def test_public_binds_need_the_explicit_flag():
    check_bind("0.0.0.0", allow_public=True)
    check_bind("8.8.8.8", allow_public=True)


def test_main_execs_vllm_with_the_added_environment(clean_env, machine, on_path, exec_calls):
    machine(gpus(4))
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    clean_env.setenv("TRLSTACK_MODEL", "org/model")
    clean_env.setenv("TRLSTACK_VLLM_PORT", "8011")
    on_path("vllm")
    with pytest.raises(exec_calls.Execd):
        serve.main(["--max-model-len", "2048", "--", "--enforce-eager"])
    [(program, argv, env)] = exec_calls
    assert program == "vllm"
    assert argv == [
        "vllm", "serve", "org/model", *SEED_COMMAND[3:],
        "--host", "127.0.0.1", "--port", "8011",
        "--tensor-parallel-size", "1", "--data-parallel-size", "2",
        "--gpu-memory-utilization", "0.9", "--max-model-len", "2048", "--enforce-eager",
    ]  # fmt: skip
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"  # the caller's choice passes through


def test_print_command_prints_one_shell_line_and_runs_nothing(clean_env, capsys, no_exec):
    assert serve.main(["--gpus", "2", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert out == (
        "CUDA_DEVICE_ORDER=PCI_BUS_ID VLLM_SERVER_DEV_MODE=1 VLLM_USE_FLASHINFER_SAMPLER=0 vllm serve "
        "Qwen/Qwen2.5-0.5B-Instruct "
        """--weight-transfer-config '{"backend": "nccl"}' """
        "--logprobs-mode processed_logprobs --max-logprobs -1 "
        "--host 127.0.0.1 --port 8000 --tensor-parallel-size 1 --data-parallel-size 2 "
        "--gpu-memory-utilization 0.9\n"
    )


def test_start_up_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, trlstack.roles.serve, trlstack.roles.train; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


# Bad input: exit 1, a message naming the fix, nothing exec'd.
BAD_INPUT = [
    ([], {}, [], "serve-vllm needs a CUDA GPU and none is visible"),
    ([], {"CUDA_VISIBLE_DEVICES": "-1"}, [0, 1], "serve-vllm needs a CUDA GPU"),
    (["--host", "0.0.0.0"], {}, [0], "binds the server on every interface"),
    (["--host", "::"], {}, [0], "--allow-public-bind"),
    (["--host", "8.8.8.8"], {}, [0], "public address 8.8.8.8"),
    (["--tensor-parallel-size", "4"], {}, [0, 1], "needs 4 GPUs, but this machine gives vLLM 2"),
    (["--data-parallel-size", "3"], {}, [0, 1], "needs 3 GPUs, but this machine gives vLLM 2"),
    (["--port", "70000"], {}, [0], "--port: 70000 is not a TCP port"),
    ([], {"TRLSTACK_VLLM_PORT": "http"}, [0], "TRLSTACK_VLLM_PORT='http' is not valid for --port"),
    ([], {"TRLSTACK_GPU_MEMORY_UTILIZATION": "1.5"}, [0], "not a fraction in (0, 1]"),
    ([], {"TRLSTACK_TENSOR_PARALLEL_SIZE": "0"}, [0], "TRLSTACK_TENSOR_PARALLEL_SIZE='0' is not valid"),
    (["--dtype", "fp8"], {}, [0], "'fp8' is not one of auto"),
    ([], {"TRLSTACK_ALLOW_PUBLIC_BIND": "maybe"}, [0], "TRLSTACK_ALLOW_PUBLIC_BIND='maybe' is not valid"),
    (["--gpus", "8"], {}, [0], "--gpus N only describes another machine together with --print-command"),
    (["--no-such-flag"], {}, [0], "unrecognized arguments: --no-such-flag"),
    ([], {"CUDA_VISIBLE_DEVICES": "7"}, [0, 1], "names GPU 7"),
    ([], {}, [0], "`vllm` is not on PATH"),
    (["--", "--host", "0.0.0.0"], {}, [0], "--host after `--` would override serve-vllm's setting"),
    (["--", "--port=9000"], {}, [0], "use serve-vllm's own --port (before `--`)"),
    (["--", "-tp", "2"], {}, [0, 1], "use serve-vllm's own --tensor-parallel-size"),
    (["--", "--max-logprobs", "5"], {}, [0], "TRL needs the value serve-vllm sets"),
    # The bind guard by meaning: every spelling of the any-address, and of --host, that vLLM or we accept.
    (["--host", "::ffff:0.0.0.0"], {}, [0], "binds the server on every interface"),
    (["--host", "0"], {}, [0], "binds the server on every interface"),
    (["--host=::"], {}, [0], "binds the server on every interface"),
    (["--ho", "0.0.0.0"], {}, [0], "binds the server on every interface"),
    ([], {"TRLSTACK_VLLM_HOST": "::ffff:0.0.0.0"}, [0], "binds the server on every interface"),
    (["--host", "::ffff:8.8.8.8"], {}, [0], "public address 8.8.8.8"),
    # The CUDA-IPC server: loopback only, whatever is allowed, and only beside its trainer.
    (["--share-gpus", "--host", "0.0.0.0", "--allow-public-bind"], {}, [0], "binds loopback only, even with"),
    (
        ["--host", "10.0.0.1"],
        {"TRLSTACK_SHARE_GPUS": "1", "TRLSTACK_ALLOW_PUBLIC_BIND": "1"},
        [0],
        "--host 10.0.0.1 binds 10.0.0.1, which is not loopback: with --weight-transfer ipc",
    ),
    (["--weight-transfer", "ipc"], {}, [0], "must run on the same GPUs: add --share-gpus"),
    (["--weight-transfer", "IPC"], {}, [0], "'IPC' is not one of auto, nccl, ipc"),
    ([], {"TRLSTACK_WEIGHT_TRANSFER": "shm"}, [0], "TRLSTACK_WEIGHT_TRANSFER='shm' is not valid"),
    (
        ["--", "--ho", "0.0.0.0"],
        {},
        [0],
        "--ho after `--` would override serve-vllm's setting (vllm serve reads",
    ),
    (["--", "--host=::"], {}, [0], "--host after `--` would override serve-vllm's setting"),
    (
        ["--", "-t", "2"],
        {},
        [0, 1],
        "-t after `--` would override serve-vllm's setting (vllm serve reads it as -tp)",
    ),
    (["--", "-tp=2"], {}, [0, 1], "use serve-vllm's own --tensor-parallel-size"),
    (["--", "--tensor_parallel=2"], {}, [0, 1], "use serve-vllm's own --tensor-parallel-size"),
    (["--", "--weight_transfer_config.backend=gloo"], {}, [0], "TRL needs the value serve-vllm sets"),
    (["--", "--weight-transfer.backend", "gloo"], {}, [0], "TRL needs the value serve-vllm sets"),
    (["--", "--model", "org/other"], {}, [0], "use serve-vllm's own --model"),
    (["--", "--model=org/other"], {}, [0], "use serve-vllm's own --model"),
    (["--", "--max-num-seqs", "8", "--max-model-len=99"], {}, [0], "use serve-vllm's own --max-model-len"),
    (
        ["--", "--enforce-eagre"],
        {},
        [0],
        "vllm serve has no option --enforce-eagre (after `--`) (did you mean",
    ),
    (["--", "--enable", "x"], {}, [0], "--enable after `--` is ambiguous for vllm serve: it could be"),
    (["--", "--config=c.yaml"], {}, [0], "reads a config file only as `--config FILE`"),
    (
        ["--", "--config", "host.yaml"],
        {},
        [0],
        "`host` in --config host.yaml would override serve-vllm's setting",
    ),
    (["--", "--config", "dotted.yaml"], {}, [0], "`weight_transfer_config` in --config dotted.yaml would"),
    (
        ["--", "--config", "typo.yaml"],
        {},
        [0],
        "vllm serve has no option `max_num_sqs` (in --config typo.yaml)",
    ),
    (["--", "--config", "c.txt"], {}, [0], "reads only .yaml or .yml config files"),
    (["--", "--config", "list.yaml"], {}, [0], "must be a YAML mapping of vLLM options"),
    (["--", "--config", "absent.yaml"], {}, [0], "--config absent.yaml: no such file"),
    (["--", "--config", "ok.yaml", "--config", "ok.yaml"], {}, [0], "--config is given more than once"),
    (["--", "--config"], {}, [0], "--config after `--` needs a file"),
    (
        [],
        {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
        [0, 1],
        "CUDA_DEVICE_ORDER=FASTEST_FIRST numbers GPUs differently",
    ),
]

VLLM_CONFIGS = {
    "host.yaml": "max-num-seqs: 8\nhost: 0.0.0.0\n",
    "dotted.yaml": "weight_transfer_config:\n  backend: gloo\n",
    "typo.yaml": "max_num_sqs: 8\n",
    "c.txt": "max-num-seqs: 8\n",
    "list.yaml": "- max-num-seqs\n",
    "ok.yaml": "max-num-seqs: 8\n",
}


@pytest.mark.parametrize(("argv", "env", "machine_gpus", "message"), BAD_INPUT)
def test_bad_input_exits_1_with_the_fix_and_starts_nothing(
    clean_env, machine, capsys, no_exec, tmp_path, argv, env, machine_gpus, message
):
    machine(gpus(len(machine_gpus)))
    clean_env.chdir(tmp_path)
    for name, text in VLLM_CONFIGS.items():
        (tmp_path / name).write_text(text)
    clean_env.setenv("PATH", str(tmp_path))  # no vllm on PATH unless a case wants one
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert serve.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("serve-vllm: error: ")
    assert message in err


def served(capsys) -> str:
    words = shlex.split(capsys.readouterr().out)
    return words[words.index("serve") + 1]


def test_a_task_s_model_folder_is_served_unless_a_model_is_named(clean_env, capsys, no_exec, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "config.yaml").write_text("model_name_or_path: model\n")
    clean_env.setenv("TRLSTACK_TASK", str(tmp_path))
    assert serve.main(["--gpus", "1", "--print-command"]) == 0
    assert served(capsys) == str(tmp_path / "model")
    assert serve.main(["--gpus", "1", "--model", "org/other", "--print-command"]) == 0
    assert served(capsys) == "org/other"
    (tmp_path / "config.yaml").write_text("learning_rate: 1.0\n")  # names no model: the default
    assert serve.main(["--gpus", "1", "--print-command"]) == 0
    assert served(capsys) == "Qwen/Qwen2.5-0.5B-Instruct"
