"""`train grpo --vllm-mode colocate` on one GPU: vLLM generates inside the trainer's process for 5 real steps,
on a reward the tiny model earns in varying amounts, so the weights change. `train grpo` naming no mode and no
server on one visible GPU does the same, at once (a wait for a server would end at --health-timeout 1).

Server mode, on one shared GPU or two: tests/gpu/test_server_mode.py.
"""

from __future__ import annotations

import json
import math
import subprocess

import pytest
from gpu_env import VARIED_REWARD, max_weight_change, missing, reward_env

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]

STEPS = 5


@pytest.mark.parametrize(
    "asked", [["--vllm-mode", "colocate"], ["--health-timeout", "1"]], ids=["asked", "one-gpu"]
)
def test_grpo_colocate_trains_five_steps_with_finite_loss_and_rewards(tiny, tmp_path, asked):
    output = tmp_path / "out"
    log = tmp_path / "train.log"
    argv = [
        "train", "grpo", *asked, "--model", str(tiny / "model"),
        "--dataset", str(tiny / "dataset"), "--output-dir", str(output), "--",
        "--max_steps", str(STEPS), "--save_steps", str(STEPS), "--logging_steps", "1",
        "--per_device_train_batch_size", "8", "--num_generations", "8", "--max_completion_length", "32",
        "--vllm_gpu_memory_utilization", "0.3", "--reward_funcs", VARIED_REWARD, "--learning_rate", "1e-3",
    ]  # fmt: skip
    env = reward_env()
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]  # one GPU, as the plan's
    with log.open("w") as sink:
        done = subprocess.run(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=900)
    text = log.read_text()
    assert done.returncode == 0, text[-4000:]
    if "--vllm-mode" not in asked:  # chosen by the one-GPU rule, and said
        assert "train: vLLM mode colocate: one GPU and no server named" in text, text[-4000:]

    changed = max_weight_change(tiny / "model", output / f"checkpoint-{STEPS}")
    assert changed > 1e-4, "the weights never changed"
    state = json.loads((output / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    rows = [row for row in state["log_history"] if "loss" in row]
    assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
    for row in rows:
        assert math.isfinite(row["loss"]), row
        assert math.isfinite(row["reward"]), row
        assert row["completions/mean_length"] > 0, row
        # Logged only when vLLM sampled the completions: its log-probs against the trainer's.
        assert math.isfinite(row["sampling/sampling_logp_difference/mean"]), row
