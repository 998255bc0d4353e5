"""Server mode as the compose fast path runs it, without the engine: serve-vllm on GPU 0, train on GPU 1.

Needs two CUDA GPUs, vLLM and TRL. One GPU cannot honestly run this: NCCL refuses two ranks on one device, and
the weight transfer is the thing under test.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def cuda_device_count() -> int:
    """GPUs the driver shows, asked without importing torch into the test collector."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def missing_gpu_stack() -> list[str]:
    import importlib.util

    return [name for name in ("vllm", "trl", "torch") if importlib.util.find_spec(name) is None]


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(cuda_device_count() < 2, reason="needs 2 CUDA GPUs: NCCL refuses two ranks on one"),
    pytest.mark.skipif(bool(missing_gpu_stack()), reason=f"gpu extra not installed: {missing_gpu_stack()}"),
]

STEPS = 5
PROMPT = "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
COMPLETION = "The answer is \\boxed{5}."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    subprocess.run([sys.executable, "-m", "trlstack", "tiny", str(root)], check=True)
    return root


def start_server(tiny: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    argv = ["serve-vllm", "--model", str(tiny / "model"), "--port", str(port)]
    argv += ["--gpu-memory-utilization", "0.3"]
    sink = log.open("w")
    return subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(url: str, server: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, "serve-vllm exited before it was healthy"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(2)
    raise AssertionError(f"{url}/health did not answer 200 within {timeout} s")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


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
    server = start_server(tiny, port, tmp_path / "server.log")
    try:
        wait_healthy(url, server)
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
    server = start_server(tiny, port, tmp_path / "server.log")
    trainer = None
    try:
        wait_healthy(url, server)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1", "TRLSTACK_HEALTH_TIMEOUT": "60"}
        argv = ["train", "grpo", "--vllm-url", url, "--model", str(tiny / "model"),
                "--dataset", str(tiny / "dataset"), "--output-dir", str(output), "--", "--max_steps", "200",
                "--save_steps", "1", "--max_completion_length", "32"]  # fmt: skip
        log = tmp_path / "killed.log"
        trainer = subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while not list(output.glob("checkpoint-*")) and time.monotonic() < deadline:
            assert trainer.poll() is None, log.read_text()[-4000:]
            time.sleep(1)
        stop(server)
        code = trainer.wait(timeout=300)  # bounded: the trainer must notice the dead server
        assert code != 0
        assert f"127.0.0.1:{port}" in log.read_text(), "the trainer's error does not name the server"
        saved = sorted(int(p.name.split("-")[1]) for p in output.glob("checkpoint-*"))

        server = start_server(tiny, port, tmp_path / "server2.log")
        wait_healthy(url, server)
        result = train(tiny, url, output, tmp_path / "resumed.log", steps=saved[-1] + 2)
        text = (tmp_path / "resumed.log").read_text()
        assert result.returncode == 0, text[-4000:]
        assert f"checkpoint-{saved[-1]}" in text, "the restart did not resume from the newest checkpoint"
        assert (output / f"checkpoint-{saved[0]}").is_dir() or saved[0] < saved[-1] - STEPS
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
        stop(server)
