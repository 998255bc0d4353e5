"""train async-grpo in server mode, as the compose main job runs it without the engine: serve-vllm and the
trainer as two processes, in gpu_env's layouts (shared-gpu: both on GPU 0 with --share-gpus, time-slicing
it, the weights over NCCL sockets, as test_ipc.py runs them through CUDA IPC; two-gpu: the server on GPU 0,
the trainer on GPU 1). On the tiny model and the reward it earns in varying amounts (rewards.py): ten steps
train and the server generates with the pushed weights; staleness, read from the trainer's own metrics, never
passes the setting; a stop saves a checkpoint the next run resumes from; a killed server or rollout worker
ends the run within its bound, naming the cause. Needs vLLM and TRL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gpu_env import VARIED_REWARD, free_port, max_weight_change, missing, start_server, stop, wait_healthy
from test_server_mode import Served, checkpoints, fixed_sequence, layouts, server_logprobs, trainer_logprobs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]

STEPS = 10
STALENESS = 1
SERVER_LOST_AFTER = 20


@pytest.fixture(scope="module", params=layouts())
def served(request, tiny, tmp_path_factory):
    layout = request.param
    port = free_port()
    log = tmp_path_factory.mktemp(f"async-server-{layout.name}") / "server.log"
    process = start_server(tiny / "model", port, log, gpus=layout.serve_gpus, flags=layout.flags)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        yield Served(layout, url, process, log)
    finally:
        stop(process)


def train_argv(tiny: Path, served: Served, output: Path, *more: str) -> list[str]:
    return ["train", "async-grpo", *served.layout.flags, "--vllm-url", served.url,
            "--model", str(tiny / "model"), "--dataset", str(tiny / "dataset"), "--output-dir", str(output),
            "--health-timeout", "60", "--max-staleness", str(STALENESS),
            "--server-lost-after", str(SERVER_LOST_AFTER), *more,
            "--", "--reward_funcs", VARIED_REWARD, "--max_completion_length", "32",
            "--per_device_train_batch_size", "8", "--num_generations", "8",
            "--gradient_accumulation_steps", "1",
            "--dtype", "auto", "--logging_steps", "1", "--learning_rate", "1e-3",
            "--warmup_steps", "0"]  # fmt: skip


def train(tiny, served, output, log, steps=STEPS) -> subprocess.CompletedProcess:
    argv = train_argv(tiny, served, output) + ["--max_steps", str(steps), "--save_steps", "1",
                                                "--save_total_limit", str(steps + 1)]  # fmt: skip
    with log.open("w") as sink:
        return subprocess.run(argv, env=served.layout.train_env(), stdout=sink, stderr=subprocess.STDOUT,
                              timeout=900)  # fmt: skip


def history(checkpoint: Path) -> list[dict]:
    return json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]


def test_ten_steps_train_and_the_server_generates_with_the_pushed_weights(served, tiny, tmp_path):
    token_ids, prompt_length = fixed_sequence(tiny)
    before = server_logprobs(served.url, token_ids, prompt_length)
    output, log = tmp_path / "out", tmp_path / "train.log"
    result = train(tiny, served, output, log)
    text = log.read_text()
    assert result.returncode == 0, text[-4000:]
    assert "tree attention kernel: " in text, "the log does not say which kernel serves tree packing"
    saved = checkpoints(output)
    assert [int(c.name.split("-")[1]) for c in saved] == list(range(1, STEPS + 1))
    assert max_weight_change(tiny / "model", saved[-1]) > 1e-4, "the weights did not change"
    assert all((c / "rollout_state.json").is_file() for c in saved)

    after = server_logprobs(served.url, token_ids, prompt_length)
    assert max(abs(a - b) for a, b in zip(before, after, strict=True)) > 1e-3, (
        "the server's weights never changed"
    )
    # The last sync follows the last step: the server holds the weights the run ended with.
    final = trainer_logprobs(saved[-1], token_ids, prompt_length)
    assert max(abs(a - b) for a, b in zip(after, final, strict=True)) < 0.05


def test_staleness_never_exceeds_the_setting(served, tiny, tmp_path):
    output = tmp_path / "out"
    result = train(tiny, served, output, tmp_path / "train.log", steps=6)
    assert result.returncode == 0, (tmp_path / "train.log").read_text()[-4000:]
    rows = [row for row in history(checkpoints(output)[-1]) if "sample/staleness_max" in row]
    assert len(rows) >= 5, "the trainer logged no staleness"
    assert max(row["sample/staleness_max"] for row in rows) <= STALENESS


def test_sigterm_saves_the_step_reached_and_the_next_run_resumes_after_it(served, tiny, tmp_path):
    output, log = tmp_path / "out", tmp_path / "stopped.log"
    argv = train_argv(tiny, served, output) + ["--max_steps", "200", "--save_steps", "1000"]
    trainer = None
    try:
        with log.open("w") as sink:
            trainer = subprocess.Popen(
                argv, env=served.layout.train_env(), stdout=sink, stderr=subprocess.STDOUT
            )
            deadline = time.monotonic() + 600
            while "'loss'" not in log.read_text():
                assert trainer.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.2)
            trainer.terminate()
            assert trainer.wait(timeout=300) == 143, log.read_text()[-4000:]
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    (step,) = [int(p.name.split("-")[1]) for p in output.glob("checkpoint-*")]
    assert f"train: SIGTERM: step {step} done; saving checkpoint-{step}, then stopping" in text
    assert (output / f"checkpoint-{step}" / "rollout_state.json").is_file()

    result = train(tiny, served, output, tmp_path / "resumed.log", steps=step + 2)
    resumed = (tmp_path / "resumed.log").read_text()
    assert result.returncode == 0, resumed[-4000:]
    assert f"resuming from {output}/checkpoint-{step}" in resumed
    steps = [row["step"] for row in history(output / f"checkpoint-{step + 2}") if "loss" in row]
    assert steps == list(range(1, step + 3))


def rollout_worker(root: int) -> int | None:
    """The rollout worker below process `root`: multiprocessing's spawned child (not its resource tracker)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            parents = ancestors(int(entry.name))
        except OSError:
            continue
        if "--multiprocessing-fork" in cmdline and "spawn_main" in cmdline and root in parents:
            return int(entry.name)
    return None


def ancestors(pid: int) -> list[int]:
    found = []
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        found.append(pid)
    return found


def run_until_training(tiny, served, output, log) -> subprocess.Popen:
    argv = train_argv(tiny, served, output) + ["--max_steps", "200", "--save_steps", "1"]
    trainer = subprocess.Popen(
        argv, env=served.layout.train_env(), stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 600
    while not list(output.glob("checkpoint-*/trainer_state.json")):
        assert trainer.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(1)
    return trainer


def test_a_killed_rollout_worker_ends_the_run_naming_it(served, tiny, tmp_path):
    log = tmp_path / "worker-killed.log"
    trainer = run_until_training(tiny, served, tmp_path / "out", log)
    try:
        worker = rollout_worker(trainer.pid)
        assert worker is not None, "no rollout worker found below the trainer"
        os.kill(worker, signal.SIGKILL)
        killed = time.monotonic()
        assert trainer.wait(timeout=120) != 0
        print(f"the run ended {time.monotonic() - killed:.0f} s after its rollout worker was killed")
        assert f"rollout worker (pid {worker}) was killed by SIGKILL" in log.read_text()
    finally:
        if trainer.poll() is None:
            trainer.kill()


@pytest.mark.parametrize("layout", layouts())
def test_a_killed_server_ends_the_run_within_its_bound_naming_it(layout, tiny, tmp_path):
    port = free_port()
    served = Served(layout, f"http://127.0.0.1:{port}", None, tmp_path / "server.log")  # type: ignore[arg-type]
    server = start_server(tiny / "model", port, served.log, gpus=layout.serve_gpus, flags=layout.flags)
    trainer = None
    try:
        wait_healthy(served.url, server, served.log)
        log = tmp_path / "server-killed.log"
        trainer = run_until_training(tiny, served, tmp_path / "out", log)
        os.killpg(server.pid, signal.SIGKILL)
        killed = time.monotonic()
        assert trainer.wait(timeout=SERVER_LOST_AFTER + 120) != 0
        print(f"the run ended {time.monotonic() - killed:.0f} s after the server was killed")
        assert f"127.0.0.1:{port}" in log.read_text(), log.read_text()[-3000:]
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
        stop(server)
