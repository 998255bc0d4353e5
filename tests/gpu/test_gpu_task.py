"""The task `trlstack init` writes, with the tiny model in a folder of its own (`model_name_or_path: model`),
trains 10 GRPO steps on one GPU: in colocate (vLLM inside the trainer) and in the shared-GPU server layout,
where serve-vllm --task serves the same model folder the trainer loads. Its brevity reward varies with every
completion, so the tiny model earns it in different amounts and the weights change; the log shows each
reward function's mean at every step.

Device time, estimated from the other GPU tests on the H200: colocate about 150 s (vLLM's cold start in the
trainer, 10 short steps), the server layout about 200 s (the server's start, then the trainer's); 350 s for
both, 400 s with a cold compile cache.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from gpu_env import FIXED_KV_CACHE, free_port, max_weight_change, missing, stop, wait_healthy

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]

STEPS = 10
REWARDS = ("correct_answer", "brevity")
MEANS = re.compile(r"'rewards/(\w+)/mean': '([-0-9.e]+)'")
# Short completions and a learning rate the tiny random model moves at; no warm-up in the scaffold.
TRL_ARGS = ["--max_steps", str(STEPS), "--save_steps", str(STEPS), "--max_completion_length", "32",
            "--learning_rate", "1e-3"]  # fmt: skip


@pytest.fixture
def task(tiny: Path, tmp_path: Path) -> Path:
    """The scaffold, its model the tiny one copied into the task folder."""
    folder = tmp_path / "task"
    subprocess.run(["trlstack", "init", str(folder)], check=True, capture_output=True)
    shutil.copytree(tiny / "model", folder / "model")
    config = folder / "config.yaml"
    config.write_text(
        re.sub(r"^model_name_or_path: .*$", "model_name_or_path: model", config.read_text(), flags=re.M)
    )
    checked = subprocess.run(["trlstack", "check-task", str(folder)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    return folder


def check_trained(task: Path, output: Path, log: str) -> None:
    """10 steps, each logging every reward's mean, finite losses, and weights moved from the task's model."""
    means = MEANS.findall(log)
    assert [name for name, _ in means] == list(REWARDS) * STEPS, means
    assert all(math.isfinite(float(value)) for _, value in means)
    state = json.loads((output / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    rows = [row for row in state["log_history"] if "loss" in row]
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    for row in rows:
        assert math.isfinite(row["loss"]) and all(f"rewards/{name}/mean" in row for name in REWARDS), row
    assert max_weight_change(task / "model", output / f"checkpoint-{STEPS}") > 1e-4, (
        "the weights never changed"
    )


def test_the_scaffold_trains_ten_grpo_steps_in_colocate(task, tmp_path):
    output = tmp_path / "out"
    argv = [
        "train",
        "grpo",
        "--vllm-mode",
        "colocate",
        "--task",
        str(task),
        "--output-dir",
        str(output),
    ]
    fixed = os.environ.get(FIXED_KV_CACHE)  # other GPU work beside: an engine that does not profile memory
    argv += ["--vllm-kv-cache-gib", f"{int(fixed) / 2**30:g}"] if fixed else []
    argv += ["--", *TRL_ARGS, "--vllm_gpu_memory_utilization", "0.3"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    assert f"train: model_name_or_path: {task / 'model'}" in log
    check_trained(task, output, log)


def test_the_scaffold_trains_ten_grpo_steps_against_a_server_sharing_the_gpu(task, tmp_path):
    port = free_port()
    server_log = tmp_path / "server.log"
    fixed = os.environ.get(FIXED_KV_CACHE)
    argv = ["serve-vllm", "--task", str(task), "--share-gpus", "--port", str(port)]
    argv += ["--gpu-memory-utilization", "0.1" if fixed else "0.3"]
    argv += ["--", "--kv-cache-memory-bytes", fixed] if fixed else []
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    with server_log.open("w") as sink:
        server = subprocess.Popen(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server, server_log)
        assert str(task / "model") in server_log.read_text()  # the task's model folder, as the trainer's
        output = tmp_path / "out"
        argv = ["train", "grpo", "--share-gpus", "--vllm-url", url, "--task", str(task)]
        argv += ["--output-dir", str(output), "--health-timeout", "60", "--", *TRL_ARGS]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
    finally:
        stop(server)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    assert "is healthy and has a weight-transfer engine" in log
    check_trained(task, output, log)
