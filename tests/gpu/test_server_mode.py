"""Server mode as the compose main job runs it, without the engine: serve-vllm and train as two processes, the
trainer's weights pushed into vLLM over NCCL after every step.

Two layouts (gpu_env.LAYOUTS): on one GPU, both share it (`--share-gpus --weight-transfer nccl`: each names
itself a host of its own to NCCL, which then moves the weights over sockets, not P2P; test_ipc.py runs the
default there, CUDA IPC); on two GPUs, the server on GPU 0 and the trainer
on GPU 1. Every run trains on a reward the tiny model earns in varying amounts (rewards.py), so the weights do
change and there is something to push. Needs vLLM and TRL; the two-GPU layout needs two GPUs.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from gpu_env import (
    LAYOUTS,
    VARIED_REWARD,
    Layout,
    cuda_devices,
    free_port,
    max_weight_change,
    missing,
    start_server,
    stop,
    wait_healthy,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]

STEPS = 5
PROMPT = "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
COMPLETION = "The answer is \\boxed{5}."
# uvicorn's line once the server's engine is loaded and its API listens: once per engine start.
STARTED = "Application startup complete"


def layouts() -> list:
    return [
        pytest.param(
            layout,
            id=layout.name,
            marks=pytest.mark.skipif(
                cuda_devices() < layout.needs_gpus, reason=f"needs {layout.needs_gpus} CUDA GPUs"
            ),
        )
        for layout in LAYOUTS
    ]


@dataclass
class Served:
    layout: Layout
    url: str
    process: subprocess.Popen
    log: Path


@pytest.fixture(scope="module", params=layouts())
def served(request, tiny, tmp_path_factory):
    """One server for the module's tests in each layout: restarted trainers meet the same engine."""
    layout: Layout = request.param
    port = free_port()
    log = tmp_path_factory.mktemp(f"server-{layout.name}") / "server.log"
    process = start_server(tiny / "model", port, log, gpus=layout.serve_gpus, flags=layout.flags)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        yield Served(layout, url, process, log)
    finally:
        stop(process)


def server_logprobs(url: str, token_ids: list[int], prompt_length: int) -> list[float]:
    """The server's log-probabilities of the fixed completion's own tokens (TRL's `actual_logprobs`; its
    `logprobs` are the top-ranked tokens' instead)."""
    from trl.generation.vllm_client import VLLMClient

    client = VLLMClient(base_url=url)
    result = client.get_sequence_logprobs([token_ids], [prompt_length], top_logprobs=1, temperature=1.0)
    return [float(row[0]) for row in result["actual_logprobs"][0]]


def trainer_logprobs(model_dir: Path, token_ids: list[int], prompt_length: int) -> list[float]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to("cuda:0").eval()
    ids = torch.tensor([token_ids], device="cuda:0")
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


def train_argv(tiny: Path, served: Served, output: Path, recipe: str = "grpo") -> list[str]:
    """train RECIPE against the server, on the varied reward, before the TRL options (after `--`)."""
    argv = ["train", recipe, *served.layout.flags, "--vllm-url", served.url, "--model", str(tiny / "model"),
            "--dataset", str(tiny / "dataset"), "--output-dir", str(output),
            "--health-timeout", "60"]  # fmt: skip
    if recipe == "online-dpo":
        # The tiny reward model ranks the pairs (its scores vary); the recipe's Hub reward model is not there.
        return [*argv, "--reward-model", str(tiny / "reward_model"), "--", "--max_new_tokens", "32",
                "--gradient_accumulation_steps", "1", "--per_device_train_batch_size", "4"]  # fmt: skip
    return [*argv, "--", "--reward_funcs", VARIED_REWARD, "--max_completion_length", "32",
            "--per_device_train_batch_size", "8", "--num_generations", "8",
            "--gradient_accumulation_steps", "1"]  # fmt: skip


def train(
    tiny: Path, served: Served, output: Path, log: Path, steps: int = STEPS, recipe: str = "grpo"
) -> subprocess.CompletedProcess:
    argv = train_argv(tiny, served, output, recipe)
    # No warm-up: the recipe's schedule starts at a learning rate of 0, so step 1 would change nothing.
    argv += ["--max_steps", str(steps), "--save_steps", "1", "--save_total_limit", str(steps + 1),
             "--logging_steps", "1", "--learning_rate", "1e-3", "--warmup_steps", "0"]  # fmt: skip
    with log.open("w") as sink:
        return subprocess.run(
            argv, env=served.layout.train_env(), stdout=sink, stderr=subprocess.STDOUT, timeout=900
        )


def checkpoints(output: Path) -> list[Path]:
    return sorted(output.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))


def losses(checkpoint: Path) -> list[float]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return [row["loss"] for row in state["log_history"] if "loss" in row]


def test_each_step_pushes_the_trainers_weights_and_the_server_generates_with_them(served, tiny, tmp_path):
    token_ids, prompt_length = fixed_sequence(tiny)
    before = server_logprobs(served.url, token_ids, prompt_length)

    output = tmp_path / "out"
    result = train(tiny, served, output, tmp_path / "train.log")
    assert result.returncode == 0, (tmp_path / "train.log").read_text()[-4000:]
    saved = checkpoints(output)
    assert len(saved) == STEPS
    # First, that there was something to push: the trainer's weights moved, step after step.
    assert max_weight_change(tiny / "model", saved[0]) > 1e-4, "the first step did not change the weights"
    assert max_weight_change(saved[0], saved[-1]) > 1e-4, "later steps did not change the weights"

    after = server_logprobs(served.url, token_ids, prompt_length)
    changed = max(abs(a - b) for a, b in zip(before, after, strict=True))
    assert changed > 1e-3, "the server's weights never changed"
    # The server holds the weights of the last step that generated; one of the saved checkpoints is that step.
    distances = [
        max(abs(a - b) for a, b in zip(after, trainer_logprobs(c, token_ids, prompt_length), strict=True))
        for c in saved
    ]
    assert min(distances) < 0.05, f"no checkpoint matches the server's logprobs: {distances}"
    assert len(losses(saved[-1])) == STEPS and all(abs(loss) < float("inf") for loss in losses(saved[-1]))


def test_a_trainer_restarted_against_the_running_server_resumes_without_an_engine_reload(
    served, tiny, tmp_path
):
    output = tmp_path / "out"
    first = train(tiny, served, output, tmp_path / "first.log", steps=1)
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-4000:]
    again = train(tiny, served, output, tmp_path / "again.log", steps=3)
    text = (tmp_path / "again.log").read_text()
    assert again.returncode == 0, text[-4000:]
    assert f"resuming from {output}/checkpoint-1" in text
    assert [int(c.name.split("-")[1]) for c in checkpoints(output)] == [1, 2, 3]
    assert max_weight_change(output / "checkpoint-1", output / "checkpoint-3") > 1e-4
    # The same engine served both trainers: still running, loaded once.
    assert served.process.poll() is None, "the server exited"
    assert served.log.read_text().count(STARTED) == 1, "the server's engine started more than once"


@pytest.mark.parametrize("recipe", ["rloo", "online-dpo"])
def test_rloo_and_online_dpo_train_two_steps_in_server_mode(served, tiny, tmp_path, recipe):
    output = tmp_path / "out"
    result = train(tiny, served, output, tmp_path / "train.log", steps=2, recipe=recipe)
    assert result.returncode == 0, (tmp_path / "train.log").read_text()[-4000:]
    saved = checkpoints(output)
    assert [int(c.name.split("-")[1]) for c in saved] == [1, 2]
    assert len(losses(saved[-1])) == 2
    assert max_weight_change(tiny / "model", saved[-1]) > 1e-4, f"{recipe} did not change the weights"


def test_sigterm_mid_run_saves_the_step_reached_and_the_next_run_resumes_after_it(served, tiny, tmp_path):
    # As `docker compose stop` or Slurm stops the trainer: the step in progress still generates on the server.
    output = tmp_path / "out"
    argv = train_argv(tiny, served, output)
    argv += ["--max_steps", "200", "--save_steps", "1000", "--logging_steps", "1"]
    log = tmp_path / "stopped.log"
    trainer = None
    try:
        with log.open("w") as sink:
            env = served.layout.train_env()
            trainer = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 600
            while "'loss'" not in log.read_text():
                assert trainer.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.2)
            trainer.terminate()  # SIGTERM
            assert trainer.wait(timeout=300) == 143, log.read_text()[-4000:]
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    (step,) = [int(p.name.split("-")[1]) for p in output.glob("checkpoint-*")]
    assert f"train: SIGTERM: step {step} done; saving checkpoint-{step}, then stopping" in text

    result = train(tiny, served, output, tmp_path / "resumed.log", steps=step + 2)
    resumed = (tmp_path / "resumed.log").read_text()
    assert result.returncode == 0, resumed[-4000:]
    assert f"resuming from {output}/checkpoint-{step}" in resumed
    state = json.loads((output / f"checkpoint-{step + 2}" / "trainer_state.json").read_text())
    assert [row["step"] for row in state["log_history"] if "loss" in row] == list(range(1, step + 3))


@pytest.mark.parametrize("layout", layouts())
def test_trainer_exits_when_the_server_dies_and_resumes_after_restart(layout, tiny, tmp_path):
    port = free_port()
    served = Served(layout, f"http://127.0.0.1:{port}", None, tmp_path / "server.log")  # type: ignore[arg-type]
    output = tmp_path / "out"
    server = start_server(tiny / "model", port, served.log, gpus=layout.serve_gpus, flags=layout.flags)
    trainer = None
    try:
        wait_healthy(served.url, server, served.log)
        argv = train_argv(tiny, served, output) + ["--max_steps", "200", "--save_steps", "1"]
        trainer_log = tmp_path / "killed.log"
        sink = trainer_log.open("w")
        trainer = subprocess.Popen(argv, env=layout.train_env(), stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while not list(output.glob("checkpoint-*/trainer_state.json")) and time.monotonic() < deadline:
            assert trainer.poll() is None, trainer_log.read_text()[-4000:]
            time.sleep(1)
        stop(server)
        killed = time.monotonic()
        code = trainer.wait(timeout=300)  # bounded: the trainer must notice the dead server
        text = trainer_log.read_text()
        assert code != 0
        assert f"127.0.0.1:{port}" in text, f"the trainer's error does not name the server: {text[-3000:]}"
        print(f"the trainer exited {time.monotonic() - killed:.0f} s after the server was stopped")
        complete = [c for c in checkpoints(output) if (c / "trainer_state.json").is_file()]
        saved = [int(c.name.split("-")[1]) for c in complete]

        served.log = tmp_path / "server-restarted.log"
        server = start_server(tiny / "model", port, served.log, gpus=layout.serve_gpus, flags=layout.flags)
        wait_healthy(served.url, server, served.log)
        result = train(tiny, served, output, tmp_path / "resumed.log", steps=saved[-1] + 2)
        text = (tmp_path / "resumed.log").read_text()
        assert result.returncode == 0, text[-4000:]
        assert f"checkpoint-{saved[-1]}" in text, "the restart did not resume from the newest checkpoint"
        # Nothing the first run saved is lost: its newest checkpoint is still there beside the new ones.
        assert (output / f"checkpoint-{saved[-1]}" / "trainer_state.json").is_file()
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
        stop(server)
