"""Server mode as the compose fast path runs it, without the engine: serve-vllm on GPU 0, train on GPU 1.

Needs two CUDA GPUs, vLLM and TRL. One GPU cannot honestly run this: NCCL refuses two ranks on one device, and
the weight transfer is the thing under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from gpu_env import cuda_devices, free_port, missing, start_server, stop, wait_healthy

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(bool(missing()), reason=str(missing())),
    pytest.mark.skipif(cuda_devices() < 2, reason="needs 2 CUDA GPUs: NCCL refuses two ranks on one"),
]

STEPS = 5
PROMPT = "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
COMPLETION = "The answer is \\boxed{5}."


def server_logprobs(url: str, token_ids: list[int], prompt_length: int) -> list[float]:
    """The server's log-probabilities of the fixed completion's tokens."""
    from trl.generation.vllm_client import VLLMClient

    client = VLLMClient(base_url=url)
    result = client.get_sequence_logprobs([token_ids], [prompt_length], top_logprobs=1, temperature=1.0)
    return [float(row[0]) for row in result["logprobs"][0]]


def trainer_logprobs(model_dir: Path, token_ids: list[int], prompt_length: int) -> list[float]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to("cuda:1").eval()
    ids = torch.tensor([token_ids], device="cuda:1")
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].float()
    logprobs = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
    return logprobs[prompt_length - 1 :].tolist()


def fixed_sequence(tiny: Path) -> tuple[list[int], int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny / "model")
    prompt = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    completion = tokenizer(COMPLETION, add_special_tokens=False)["input_ids"]
    return prompt + completion, len(prompt)


def train(tiny: Path, url: str, output: Path, log: Path, steps: int = STEPS) -> subprocess.CompletedProcess:
    # Both processes see only their own GPU here, so the UUID overlap check has nothing to compare.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1"}
    argv = [
        "train", "grpo", "--vllm-mode", "server", "--vllm-url", url, "--model", str(tiny / "model"),
        "--dataset", str(tiny / "dataset"), "--output-dir", str(output), "--health-timeout", "60", "--",
        "--max_steps", str(steps), "--save_steps", "1", "--save_total_limit", str(steps + 1),
        "--per_device_train_batch_size", "8", "--num_generations", "8", "--max_completion_length", "32",
        "--logging_steps", "1", "--learning_rate", "1e-3", "--reward_funcs", "accuracy_reward",
    ]  # fmt: skip
    with log.open("w") as sink:
        return subprocess.run(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=900)


def test_server_generates_with_the_weights_the_trainer_pushed(tiny, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    server = start_server(tiny / "model", port, log, gpus="0")
    try:
        wait_healthy(url, server, log)
        token_ids, prompt_length = fixed_sequence(tiny)
        before = server_logprobs(url, token_ids, prompt_length)

        result = train(tiny, url, tmp_path / "out", tmp_path / "train.log")
        assert result.returncode == 0, (tmp_path / "train.log").read_text()[-4000:]
        after = server_logprobs(url, token_ids, prompt_length)
    finally:
        stop(server)

    changed = max(abs(a - b) for a, b in zip(before, after, strict=True))
    assert changed > 1e-3, "the server's weights never changed"
    # The server holds the weights of the last step that generated; one of the saved checkpoints is that step.
    checkpoints = sorted((tmp_path / "out").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert len(checkpoints) == STEPS
    distances = [
        max(abs(a - b) for a, b in zip(after, trainer_logprobs(c, token_ids, prompt_length), strict=True))
        for c in checkpoints
    ]
    assert min(distances) < 0.05, f"no checkpoint matches the server's logprobs: {distances}"

    state = json.loads((checkpoints[-1] / "trainer_state.json").read_text())
    losses = [row["loss"] for row in state["log_history"] if "loss" in row]
    assert len(losses) == STEPS and all(abs(loss) < float("inf") for loss in losses)


def test_trainer_exits_when_the_server_dies_and_resumes_after_restart(tiny, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    output = tmp_path / "out"
    server_log = tmp_path / "server.log"
    server = start_server(tiny / "model", port, server_log, gpus="0")
    trainer = None
    try:
        wait_healthy(url, server, server_log)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1", "TRLSTACK_HEALTH_TIMEOUT": "60"}
        argv = ["train", "grpo", "--vllm-url", url, "--model", str(tiny / "model"),
                "--dataset", str(tiny / "dataset"), "--output-dir", str(output), "--", "--max_steps", "200",
                "--save_steps", "1", "--max_completion_length", "32"]  # fmt: skip
        trainer_log = tmp_path / "killed.log"
        sink = trainer_log.open("w")
        trainer = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while not list(output.glob("checkpoint-*")) and time.monotonic() < deadline:
            assert trainer.poll() is None, trainer_log.read_text()[-4000:]
            time.sleep(1)
        stop(server)
        code = trainer.wait(timeout=300)  # bounded: the trainer must notice the dead server
        assert code != 0
        assert f"127.0.0.1:{port}" in trainer_log.read_text(), "the trainer's error does not name the server"
        saved = sorted(int(p.name.split("-")[1]) for p in output.glob("checkpoint-*"))

        server_log = tmp_path / "server-restarted.log"
        server = start_server(tiny / "model", port, server_log, gpus="0")
        wait_healthy(url, server, server_log)
        result = train(tiny, url, output, tmp_path / "resumed.log", steps=saved[-1] + 2)
        text = (tmp_path / "resumed.log").read_text()
        assert result.returncode == 0, text[-4000:]
        assert f"checkpoint-{saved[-1]}" in text, "the restart did not resume from the newest checkpoint"
        # Nothing the first run saved is lost: its newest checkpoint is still there beside the new ones.
        assert (output / f"checkpoint-{saved[-1]}" / "trainer_state.json").is_file()
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
        stop(server)


def test_sigterm_mid_run_saves_the_step_reached_and_the_next_run_resumes_after_it(tiny, tmp_path):
    # As `docker compose stop` or Slurm stops the trainer: the step in progress still generates on the server.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    output = tmp_path / "out"
    server_log = tmp_path / "server.log"
    server = start_server(tiny / "model", port, server_log, gpus="0")
    trainer = None
    try:
        wait_healthy(url, server, server_log)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1"}
        argv = ["train", "grpo", "--vllm-url", url, "--model", str(tiny / "model"),
                "--dataset", str(tiny / "dataset"), "--output-dir", str(output), "--", "--max_steps", "200",
                "--save_steps", "1000", "--logging_steps", "1", "--max_completion_length", "32"]  # fmt: skip
        log = tmp_path / "stopped.log"
        with log.open("w") as sink:
            trainer = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 600
            while "'loss'" not in log.read_text():
                assert trainer.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.2)
            trainer.terminate()  # SIGTERM
            assert trainer.wait(timeout=300) == 143, log.read_text()[-4000:]
        text = log.read_text()
        assert "Traceback" not in text, text[-4000:]
        (step,) = [int(p.name.split("-")[1]) for p in output.glob("checkpoint-*")]
        assert f"train: SIGTERM: step {step} done; saving checkpoint-{step}, then stopping" in text

        result = train(tiny, url, output, tmp_path / "resumed.log", steps=step + 2)
        resumed = (tmp_path / "resumed.log").read_text()
        assert result.returncode == 0, resumed[-4000:]
        assert f"resuming from {output}/checkpoint-{step}" in resumed
        state = json.loads((output / f"checkpoint-{step + 2}" / "trainer_state.json").read_text())
        assert [row["step"] for row in state["log_history"] if "loss" in row] == list(range(1, step + 3))
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
        stop(server)
