"""A newcomer's first hour, scripted: README's "Which path" (one GPU, several GPUs, a Slurm cluster) walked
command by command on a machine without a GPU (NVML stood in where a GPU count is needed, the driver being the
one boundary faked), each README command run as tests/readme_commands.py says it is run; then the mistakes a
newcomer makes through every entry (plan, the plan in .env as compose's plan-check reads it, serve-vllm,
train, trlstack slurm, doctor): typos and old spellings, wrong GPU lists, a path that does not exist, a
hand-written .env. Each mistake fails at once (exit 1, no traceback) naming a fix, and the fix, applied as
the message says, then works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from dotenv import dotenv_values
from readme_commands import EXERCISED, REPO, Dry

BIN = Path(sys.executable).parent
SIF = "/shared/images/trlstack.sif"
IMAGE = "trlstack:0.1.0-torch2.11-vllm0.25-cu13"
H200_BYTES = 141 << 30

# NVML as the driver answers on a machine of N H200s (the count written in when the stand-in is made).
FAKE_NVML = """
class NVMLError(Exception):
    pass

NVML_DEVICE_MIG_ENABLE = 1

def nvmlInit():
    pass

def nvmlShutdown():
    pass

def nvmlSystemGetDriverVersion():
    return "580.95.05"

def nvmlDeviceGetCount():
    return {count}

def nvmlDeviceGetHandleByIndex(index):
    return index

def nvmlDeviceGetUUID(handle):
    return f"GPU-{{handle:08d}}-0000-0000-0000-000000000000"

def nvmlDeviceGetName(handle):
    return "NVIDIA H200"

def nvmlDeviceGetCudaComputeCapability(handle):
    return (9, 0)

class _Memory:
    total = {memory}

def nvmlDeviceGetMemoryInfo(handle):
    return _Memory()

def nvmlDeviceGetMigMode(handle):
    raise NVMLError("Not Supported")
"""


@dataclass
class Machine:
    """A folder to work in, on a machine of `gpus` GPUs (0: no driver at all), run as a user runs it."""

    folder: Path
    gpus: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def environ(self, extra: Mapping[str, str]) -> dict[str, str]:
        kept = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("TRLSTACK_", "CUDA_", "HF_", "NCCL_", "VLLM_", "PYTHONPATH"))
        }
        kept["PATH"] = f"{BIN}{os.pathsep}{kept.get('PATH', '')}"
        kept["HF_HUB_OFFLINE"] = "1"
        if self.gpus:
            nvml = self.folder.parent / f"nvml-{self.gpus}"
            nvml.mkdir(exist_ok=True)
            (nvml / "pynvml.py").write_text(FAKE_NVML.format(count=self.gpus, memory=H200_BYTES))
            kept["PYTHONPATH"] = str(nvml)
        return {**kept, **self.env, **extra}

    def run(self, command: str | Sequence[str], **extra: str) -> subprocess.CompletedProcess[str]:
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        return subprocess.run(
            argv, cwd=self.folder, env=self.environ(extra), capture_output=True, text=True, timeout=120
        )

    def ok(self, command: str | Sequence[str], **extra: str) -> subprocess.CompletedProcess[str]:
        done = self.run(command, **extra)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr[-3000:]}"
        return done

    def refused(
        self, command: str | Sequence[str], words: Sequence[str], **extra: str
    ) -> subprocess.CompletedProcess[str]:
        done = self.run(command, **extra)
        said = done.stderr
        assert done.returncode == 1, f"{command}: exit {done.returncode}\n{said[-3000:]}"
        assert "Traceback" not in said and ": error: " in said, said
        for word in words:
            assert word in said, f"{command}: {word!r} not in\n{said}"
        return done

    def plan_check(self, service: str | None = None) -> subprocess.CompletedProcess[str]:
        """`trlstack plan --check` as compose's plan-check runs it: .env's values under the keys compose
        hands it (compose/roles.yaml, and the colocate layout's TRLSTACK_VARIANT)."""
        return self.run(["trlstack", "plan", "--check", *(["--service", service] if service else [])],
                        **plan_check_env(self.folder / ".env"))  # fmt: skip


def plan_check_env(env_file: Path) -> dict[str, str]:
    roles = yaml.safe_load((REPO / "compose" / "roles.yaml").read_text())
    keys = list(roles["services"]["check"]["environment"])  # the role compose's plan-check runs
    written = {key: value or "" for key, value in dotenv_values(env_file).items()}
    passed = {key: written[key] for key in keys if key in written}
    if written.get("TRLSTACK_VARIANT"):
        passed["TRLSTACK_VARIANT"] = written["TRLSTACK_VARIANT"]  # the layout's own (compose/colocate.yaml)
    return passed


def readme(key: str, gpus_shown: bool = False) -> str:
    """A README command as tests/readme_commands.py runs it (a Dry), without the `--gpus N` its dry mode
    adds where this machine's GPUs (the stand-in's) are to be found instead."""
    how = EXERCISED[key]
    assert isinstance(how, Dry), f"{key}: the walk runs README's dry commands"
    line = how.command(key)
    if not gpus_shown:
        for count in ("1", "2", "8"):
            line = line.replace(f" --gpus {count} ", " ").removesuffix(f" --gpus {count}")
    return line


@pytest.fixture
def machine(tmp_path):
    def make(gpus: int = 0) -> Machine:
        folder = tmp_path / f"machine-{gpus}"
        folder.mkdir(exist_ok=True)
        return Machine(folder, gpus)

    return make


def env_values(folder: Path) -> dict[str, str]:
    return {key: value or "" for key, value in dotenv_values(folder / ".env").items()}


def model_folder(folder: Path, heads: int = 14) -> Path:
    model = folder / "my-model"
    model.mkdir(exist_ok=True)
    config = {"model_type": "qwen2", "num_attention_heads": heads, "hidden_size": 896, "vocab_size": 151936}
    config |= {"intermediate_size": 4864, "num_hidden_layers": 24, "num_key_value_heads": 2}
    (model / "config.json").write_text(json.dumps(config))
    return model


# README, "Which path": one GPU.


def test_one_gpu_the_plan_the_check_and_a_trainer_that_needs_no_server(machine):
    host = machine(1)
    host.ok(readme("trlstack plan --format env -o .env"))
    assert env_values(host.folder)["TRLSTACK_VARIANT"] == "colocate"
    assert "no server" in host.plan_check().stderr
    host.refused(
        ["trlstack", "plan", "--check", "--service", "async-grpo"],
        ["`trlstack plan --share-gpus --format env -o .env`"],
        **plan_check_env(host.folder / ".env"),
    )
    # `train grpo` names no server: on this one GPU it trains colocate, saying why, instead of waiting
    bare = host.ok(["train", "grpo", "--print-command"])
    assert (
        "vllm_mode: colocate" in bare.stdout
        and "vLLM mode colocate: one GPU and no server named" in bare.stderr
    )
    host.ok(readme("train grpo --vllm-mode colocate"))
    # async-grpo has no colocate mode: refused at once, naming both ways to a server; the first one works
    host.refused(["train", "async-grpo", "--print-command"], ["`serve-vllm --share-gpus`", "--vllm-url"])
    host.ok(["train", "async-grpo", "--share-gpus", "--vllm-url", "http://127.0.0.1:8000", "--print-command"])
    host.ok(["serve-vllm", "--share-gpus", "--print-command"])
    # the shared-GPU server, chosen: the plan says so and compose's check passes it
    host.ok(readme("trlstack plan --share-gpus --format env -o .env"))
    assert env_values(host.folder)["SHARE_GPUS"] == "1" and "TRLSTACK_VARIANT" not in env_values(host.folder)
    assert "share their GPUs" in host.plan_check("async-grpo").stderr


# README, "Which path": one machine with several GPUs.


def test_several_gpus_the_plan_feeds_both_roles_as_compose_does(machine):
    host = machine(8)
    host.ok(readme("trlstack plan --format env -o .env"))
    assert "are disjoint" in host.plan_check().stderr
    plan = env_values(host.folder)
    # the roles as compose starts them, from the plan's keys
    served = host.ok(
        ["serve-vllm", "--print-command"],
        CUDA_VISIBLE_DEVICES=plan["SERVE_GPUS"],
        TRLSTACK_TENSOR_PARALLEL_SIZE=plan["TENSOR_PARALLEL_SIZE"],
        TRLSTACK_DATA_PARALLEL_SIZE=plan["DATA_PARALLEL_SIZE"],
        TRLSTACK_GPU_MEMORY_UTILIZATION=plan["GPU_MEMORY_UTILIZATION"],
    )
    assert "--data-parallel-size 4 --gpu-memory-utilization 0.9" in served.stdout
    trained = host.ok(
        ["train", "grpo", "--print-command"],
        CUDA_VISIBLE_DEVICES=plan["TRAIN_GPUS"],
        TRLSTACK_SERVE_GPUS=plan["SERVE_GPUS"],
        TRLSTACK_VLLM_URL="http://127.0.0.1:8000",
        TRLSTACK_NUM_PROCESSES=plan["NUM_PROCESSES"],
    )
    assert "--num_processes 4" in trained.stdout and "vllm_mode: server" in trained.stdout
    host.ok(readme("trlstack plan --serve-gpus 0-5 --train-gpus 6,7 --tensor-parallel-size 2 --num-heads 14"))


# README, "Which path": a Slurm cluster.


def test_a_slurm_cluster_the_image_and_the_job(machine):
    host = machine(0)
    host.ok(readme(f"trlstack export --format sif {IMAGE} -o /shared/images/trlstack.sif"))
    key = (
        "trlstack slurm grpo --nodes 4 --gpus-per-node 8 --image /shared/images/trlstack.sif --time 24:00:00 "
        "--output-dir /shared/runs/grpo-1 --submit"
    )
    assert "#SBATCH" in host.ok(readme(key, gpus_shown=True)).stdout


# The mistakes, through every entry: each refused at once naming a fix, and the fix works.

SLURM = ["trlstack", "slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--image", SIF]
SLURM += ["--output-dir", "/shared/runs/grpo-1", "--dry-run"]


def test_wrong_gpu_lists_and_sizes_through_plan_serve_vllm_and_slurm(machine):
    host = machine(8)
    host.refused(
        "trlstack plan --serve-gpus 0-3 --train-gpus 3-7", ["GPU 3 is in both", "Change one of them"]
    )
    host.ok("trlstack plan --serve-gpus 0-3 --train-gpus 4-7")
    # the tensor-parallel size against the heads of a local model's config.json (14)
    model = model_folder(host.folder)
    host.refused(
        f"trlstack plan --tensor-parallel-size 4 --model {model}",
        ["does not divide the model's 14 attention heads; choose one of 1, 2"],
    )
    host.ok(f"trlstack plan --tensor-parallel-size 2 --model {model}")
    host.refused(
        ["serve-vllm", "--model", str(model), "--tensor-parallel-size", "4", "--print-command"],
        ["does not divide the model's 14 attention heads; choose one of 1, 2"],
        CUDA_VISIBLE_DEVICES="0,1,2,3",
    )
    # vLLM's layout leaving GPUs idle, refused with the sizes that fill them
    host.refused(
        ["serve-vllm", "--tensor-parallel-size", "1", "--data-parallel-size", "1", "--print-command"],
        ["uses 1 of the 4 GPUs CUDA_VISIBLE_DEVICES=0,1,2,3 gives vLLM", "set --data-parallel-size 4"],
        CUDA_VISIBLE_DEVICES="0,1,2,3",
    )
    host.ok(
        ["serve-vllm", "--tensor-parallel-size", "1", "--data-parallel-size", "4", "--print-command"],
        CUDA_VISIBLE_DEVICES="0,1,2,3",
    )
    host.refused([*SLURM, "--tensor-parallel-size", "3"], ["choose one of 1, 2, 4, 8"])
    host.ok([*SLURM, "--tensor-parallel-size", "2"])
    host.refused([*SLURM, "--port", "29500"], ["--port and --main-process-port are both 29500", "give"])
    host.ok([*SLURM, "--port", "8001"])
    host.refused(
        "trlstack doctor --port 51216", ["--port and --group-port are both 51216", "give --group-port"]
    )
    host.ok("trlstack doctor --port 8001")


def test_a_shared_gpu_that_leaves_the_trainer_too_little_is_refused_with_both_numbers(machine):
    host = machine(1)
    (host.folder / ".env").write_text("TRLSTACK_MODEL=Qwen/Qwen2.5-0.5B-Instruct\n")
    done = host.refused(
        "trlstack plan --share-gpus --gpu-memory-utilization 0.95 --format env -o .env",
        ["0.95 gives vLLM 133.9 GiB of each 141.0 GiB GPU and leaves the trainer 7.0 GiB", "to 0.92 or less"],
    )
    assert (
        done.stdout == ""
        and (host.folder / ".env").read_text() == "TRLSTACK_MODEL=Qwen/Qwen2.5-0.5B-Instruct\n"
    )
    host.ok("trlstack plan --share-gpus --gpu-memory-utilization 0.92 --format env -o .env")
    assert "share their GPUs" in host.plan_check().stderr


def test_a_path_that_does_not_exist_through_every_role_previews_included(machine):
    host = machine(2)
    for command in (
        "serve-vllm --model ./my-model --print-command",
        "train grpo --model ./my-model --print-command",
        "trlstack plan --model ./my-model",
    ):
        host.refused(command, ["./my-model", "give a", "folder"])
    model_folder(host.folder)  # the fix: the folder, where the command is run
    for command in (
        "serve-vllm --model ./my-model --print-command",
        "train grpo --model ./my-model --print-command",
        "trlstack plan --model ./my-model",
    ):
        host.ok(command)
    host.refused(
        "train grpo --dataset ./my-data --gpus 1 --print-command", ["--dataset (TRLSTACK_DATASET) ./my-data"]
    )


def test_previews_without_a_gpu_name_gpus_n_and_work_with_it(machine):
    host = machine(0)  # no driver at all
    host.refused("train grpo --print-command", ["--print-command --gpus N"])
    host.ok("train grpo --print-command --gpus 2")
    host.refused("serve-vllm --print-command", ["--print-command --gpus N"])
    host.ok("serve-vllm --print-command --gpus 1")
    host.refused("trlstack plan", ["--gpus N"])
    host.ok("trlstack plan --gpus 4")


def test_old_and_other_spellings_are_refused_naming_the_one_name(machine):
    host = machine(2)
    host.refused(
        "train grpo --vllm-group-port 51300 --print-command", ["--vllm-group-port is now --group-port"]
    )
    host.ok("train grpo --group-port 51300 --print-command")
    host.ok("trlstack plan --format env -o .env")
    with (host.folder / ".env").open("a") as env:
        env.write("TRLSTACK_GPU_MEMORY_UTILIZATION=0.5\n")
    done = host.plan_check()
    assert (
        done.returncode == 1
        and "write GPU_MEMORY_UTILIZATION=0.5 and remove TRLSTACK_GPU_MEMORY_UTILIZATION" in done.stderr
    )
    # the fix as the message says it: the key written, the other spelling removed
    removed = "-e '/^TRLSTACK_GPU_MEMORY_UTILIZATION=/d'"
    host.ok(f"sed -i {removed} -e 's/^GPU_MEMORY_UTILIZATION=.*/GPU_MEMORY_UTILIZATION=0.5/' .env")
    assert host.plan_check().returncode == 0 and env_values(host.folder)["GPU_MEMORY_UTILIZATION"] == "0.5"


def test_a_hand_written_env_is_refused_naming_the_line_to_write(machine):
    host = machine(8)
    host.ok("trlstack plan --format env -o .env")
    text = (host.folder / ".env").read_text()
    for wrong, right, words in [
        ("SERVE_GPUS=0,1,2,3", "SERVE_GPUS=0-3", ["write SERVE_GPUS=0,1,2,3"]),
        ("DATA_PARALLEL_SIZE=4", "DATA_PARALLEL_SIZE=1", ["leaving 3 idle; set DATA_PARALLEL_SIZE=4"]),
        (
            "NUM_PROCESSES=4",
            "NUM_PROCESSES=6",
            ["NUM_PROCESSES=6 needs a GPU each, but TRAIN_GPUS=4,5,6,7 has 4"],
        ),
        ("TRAIN_GPUS=4,5,6,7", "TRAIN_GPUS=3,4,5,6", ["GPU 3 is in both", "Change one of them"]),
    ]:
        (host.folder / ".env").write_text(text.replace(wrong, right))
        done = host.plan_check()
        assert done.returncode == 1 and all(word in done.stderr for word in words), done.stderr
        (host.folder / ".env").write_text(text)  # the line as the message (or the plan) writes it
        assert host.plan_check().returncode == 0
    # a misspelled layout: compose itself cannot say it, so a new plan refuses to write beside it
    (host.folder / ".env").write_text("TRLSTACK_VARIANT=isolate\n")
    host.refused("trlstack plan --format env -o .env", ["write one of shared, isolated, colocate"])
    (host.folder / ".env").write_text("TRLSTACK_VARIANT=isolated\n")
    host.ok("trlstack plan --format env -o .env")
    assert env_values(host.folder)["TRLSTACK_VARIANT"] == "isolated"  # kept: the layout the user chose
