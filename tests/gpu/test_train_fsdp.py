"""FSDP2 on GPUs through `train --sharding fsdp2`, as users run it:

- two GPUs, one rank each, colocated vLLM: 2 steps saved as one shard per rank, resumed to step 4, the final
  model saved whole (safetensors) by the recipe runner; another process count refused before anything starts.
- two ranks on one GPU, colocated: each rank's vLLM engine with a fixed KV cache (`--vllm-kv-cache-gib`,
  as two engines profiling one GPU's memory at once fail vLLM's start-up check); 5 steps, resumed, one rank
  refused.
- two ranks on one GPU (`--ranks-per-gpu 2`: each rank names itself an NCCL host of its own, so the two talk
  over sockets and time-slice the GPU) in server mode, the server on the same GPU in the shared-gpu layout
  and on its own in two-gpu: every step pushes the gathered weights and the server's log-probabilities follow
  them; a stop signal mid-run saves a shard per rank at the step reached, the same two ranks resume from it,
  one rank is refused, naming the two. A rank kept out of a push
  (held_rank/sitecustomize.py) leaves the other in the push's real all-gather: the push's bound ends the run,
  naming the rank and where it is stuck, and the checkpoints stay.

Needs vLLM and TRL; the two-GPU cases need two GPUs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from gpu_env import (
    HERE,
    LAYOUTS,
    VARIED_REWARD,
    cuda_devices,
    free_port,
    max_weight_change,
    missing,
    reward_env,
    start_server,
    stop,
    wait_healthy,
)
from test_server_mode import Served, checkpoints, fixed_sequence, layouts, server_logprobs, trainer_logprobs
from test_server_mode import served as served  # noqa: F401 - the module's server, one per layout

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]
BY_NAME = {layout.name: layout for layout in LAYOUTS}
REFUSED = "holds FSDP2 shards of 2 processes and this run has 1"
TRL_OPTIONS = [
    "--per_device_train_batch_size", "4", "--num_generations", "4", "--max_completion_length", "16",
    "--reward_funcs", VARIED_REWARD, "--logging_steps", "1", "--learning_rate", "1e-3",
]  # fmt: skip


def colocate_argv(tiny: Path, output: Path, *more: str) -> list[str]:
    return ["train", "grpo", "--vllm-mode", "colocate", "--sharding", "fsdp2", *more,
            "--model", str(tiny / "model"), "--dataset", str(tiny / "dataset"), "--output-dir", str(output),
            "--", *TRL_OPTIONS, "--vllm_gpu_memory_utilization", "0.1"]  # fmt: skip


def run(argv: list[str], log: Path, gpus: str, *trl: str, **more_env: str) -> subprocess.CompletedProcess:
    with log.open("a") as sink:
        env = reward_env() | {"CUDA_VISIBLE_DEVICES": gpus} | more_env
        return subprocess.run([*argv, *trl], env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=900)


def wait_in_log(log: Path, process: subprocess.Popen, text: str, timeout: float = 600) -> None:
    """Return once `text` is in `log`; fail with the log's end if `process` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.2)


def shards(checkpoint: Path) -> list[str]:
    return sorted(path.name for path in (checkpoint / "pytorch_model_fsdp_0").glob("*.distcp"))


@pytest.mark.skipif(cuda_devices() < BY_NAME["two-gpu"].needs_gpus, reason="needs 2 CUDA GPUs")
def test_fsdp2_on_two_gpus_saves_shards_resumes_and_ends_with_a_whole_model(tiny, tmp_path):
    output, log = tmp_path / "out", tmp_path / "train.log"
    argv = colocate_argv(tiny, output)
    done = run(argv, log, "0,1", "--max_steps", "2", "--save_steps", "2")
    assert done.returncode == 0, log.read_text()[-4000:]
    assert shards(output / "checkpoint-2") == ["__0_0.distcp", "__1_0.distcp"]
    assert (output / "trlstack-accelerate.yaml").is_file()

    done = run(argv, log, "0,1", "--max_steps", "4", "--save_steps", "2")
    assert done.returncode == 0, log.read_text()[-4000:]
    text = log.read_text()
    assert "resuming from" in text and "checkpoint-2" in text
    state = json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert list(output.glob("model*.safetensors")), "the final model was not saved whole"

    refused = run(argv, log, "0", "--max_steps", "6")
    assert refused.returncode == 1
    assert REFUSED in log.read_text()


def test_two_colocated_fsdp2_ranks_share_one_gpu_with_a_fixed_kv_cache_each(tiny, tmp_path):
    """Each rank starts its own vLLM engine on the one GPU, with a fixed KV cache (vLLM's start-up memory
    profile would see the other rank free memory): 5 steps, each pushing the gathered weights into both
    engines; resumed by the same two ranks; one rank refused."""
    output, log = tmp_path / "out", tmp_path / "train.log"
    argv = colocate_argv(tiny, output, "--ranks-per-gpu", "2", "--vllm-kv-cache-gib", "1")
    gpu = BY_NAME["shared-gpu"].train_gpus
    # TRL quiets vLLM to ERROR unless VLLM_LOGGING_LEVEL is set; INFO shows the line that says it skipped
    done = run(argv, log, gpu, "--max_steps", "5", "--save_steps", "5", VLLM_LOGGING_LEVEL="INFO")
    text = log.read_text()
    assert done.returncode == 0, text[-4000:]
    assert "each rank's vLLM engine holds a fixed 1 GiB KV cache" in text, text[-4000:]
    # vLLM's own line, once per engine: the memory profile was skipped
    assert text.count("as specified by kv_cache_memory_bytes") == 2, text[-4000:]
    assert shards(output / "checkpoint-5") == ["__0_0.distcp", "__1_0.distcp"]
    assert max_weight_change(tiny / "model", output) > 1e-4, "the weights did not change"
    state = json.loads((output / "checkpoint-5" / "trainer_state.json").read_text())
    gaps = [row["sampling/sampling_logp_difference/mean"] for row in state["log_history"] if "loss" in row]
    print(f"vLLM's log-probabilities against the trainer's, mean gap per step: {gaps}")
    # Step 1 samples with the weights both sides loaded. Had a later push not reached the engines, they would
    # sample from older weights than the trainer scores with (learning rate 1e-3), and the gap would grow.
    assert len(gaps) == 5 and max(gaps[1:]) < max(3 * gaps[0], 0.05), gaps

    again = run(argv, log, gpu, "--max_steps", "6", "--save_steps", "5")
    assert again.returncode == 0, log.read_text()[-4000:]
    assert f"resuming from {output}/checkpoint-5" in log.read_text()
    assert shards(checkpoints(output)[-1]) == ["__0_0.distcp", "__1_0.distcp"]

    one_rank = colocate_argv(tiny, output, "--vllm-kv-cache-gib", "1")
    refused_log = tmp_path / "refused.log"
    refused = run(one_rank, refused_log, gpu, "--max_steps", "8")
    assert refused.returncode == 1, refused_log.read_text()[-4000:]
    assert REFUSED in refused_log.read_text()


def server_argv(tiny: Path, served: Served, output: Path, ranks: int = 2) -> list[str]:
    return ["train", "grpo", *served.layout.flags, "--ranks-per-gpu", str(ranks), "--sharding", "fsdp2",
            "--vllm-url", served.url, "--model", str(tiny / "model"), "--dataset", str(tiny / "dataset"),
            "--output-dir", str(output), "--health-timeout", "60", "--", *TRL_OPTIONS]  # fmt: skip


def test_two_fsdp2_ranks_push_every_step_and_the_server_follows(served, tiny, tmp_path):  # noqa: F811
    token_ids, prompt_length = fixed_sequence(tiny)
    before = server_logprobs(served.url, token_ids, prompt_length)
    output, log = tmp_path / "out", tmp_path / "train.log"
    argv = server_argv(tiny, served, output)
    gpus = served.layout.train_gpus
    done = run(argv, log, gpus, "--max_steps", "5", "--save_steps", "5")
    assert done.returncode == 0, log.read_text()[-4000:]
    assert shards(output / "checkpoint-5") == ["__0_0.distcp", "__1_0.distcp"]
    assert max_weight_change(tiny / "model", output) > 1e-4, "the weights did not change"
    after = server_logprobs(served.url, token_ids, prompt_length)
    assert max(abs(a - b) for a, b in zip(before, after, strict=True)) > 1e-3, "the server never changed"

    # The server holds what the last step generated with (step 4's weights); one more step resumed from
    # checkpoint-5 pushes step 5's, which the first run saved whole at its end.
    five = tmp_path / "step-5"
    shutil.copytree(output, five, ignore=shutil.ignore_patterns("checkpoint-*"))
    again = run(argv, log, gpus, "--max_steps", "6", "--save_steps", "5")
    assert again.returncode == 0, log.read_text()[-4000:]
    assert f"resuming from {output}/checkpoint-5" in log.read_text()
    served_now = server_logprobs(served.url, token_ids, prompt_length)
    trained = trainer_logprobs(five, token_ids, prompt_length)
    distance = max(abs(a - b) for a, b in zip(served_now, trained, strict=True))
    assert distance < 0.05, f"the server's logprobs do not follow the pushed weights: {distance}"
    assert shards(checkpoints(output)[-1]) == ["__0_0.distcp", "__1_0.distcp"]


def test_two_fsdp2_ranks_stop_with_a_shard_each_resume_and_refuse_one_rank(served, tiny, tmp_path):  # noqa: F811
    output, log = tmp_path / "out", tmp_path / "stopped.log"
    argv = server_argv(tiny, served, output)
    with log.open("w") as sink:
        env = reward_env() | {"CUDA_VISIBLE_DEVICES": served.layout.train_gpus}
        endless = [*argv, "--max_steps", "200", "--save_steps", "1000"]
        trainer = subprocess.Popen(endless, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            wait_in_log(log, trainer, "'loss'")
            trainer.terminate()  # SIGTERM, as `docker compose stop` or Slurm stops the trainer
            assert trainer.wait(timeout=300) == 143, log.read_text()[-4000:]
        finally:
            if trainer.poll() is None:
                trainer.kill()
    text = log.read_text()
    assert "2 training ranks on each GPU" in text, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    (step,) = [int(p.name.split("-")[1]) for p in output.glob("checkpoint-*")]
    assert f"train: SIGTERM: step {step} done; saving checkpoint-{step}, then stopping" in text
    assert shards(output / f"checkpoint-{step}") == ["__0_0.distcp", "__1_0.distcp"]

    resumed_log = tmp_path / "resumed.log"
    gpus = served.layout.train_gpus
    done = run(argv, resumed_log, gpus, "--max_steps", str(step + 1), "--save_steps", "1000")
    resumed = resumed_log.read_text()
    assert done.returncode == 0, resumed[-4000:]
    assert f"resuming from {output}/checkpoint-{step}" in resumed
    state = json.loads((output / f"checkpoint-{step + 1}" / "trainer_state.json").read_text())
    assert state["global_step"] == step + 1

    one_rank = server_argv(tiny, served, output, ranks=1)
    refused_log = tmp_path / "refused.log"
    refused = run(one_rank, refused_log, gpus, "--max_steps", str(step + 5))
    assert refused.returncode == 1, refused_log.read_text()[-4000:]
    assert REFUSED in refused_log.read_text()


@pytest.mark.parametrize("layout", layouts())
def test_a_rank_kept_out_of_a_push_ends_the_run_within_the_bound_naming_rank_and_phase(
    layout, tiny, tmp_path
):
    # A server of its own: the one the push was heading for may wait for it forever.
    port, bound = free_port(), 30
    served = Served(layout, f"http://127.0.0.1:{port}", None, tmp_path / "server.log")  # type: ignore[arg-type]
    server = start_server(tiny / "model", port, served.log, gpus=layout.serve_gpus, flags=layout.flags)
    output, log = tmp_path / "out", tmp_path / "stuck.log"
    try:
        wait_healthy(served.url, server, served.log)
        argv = server_argv(tiny, served, output)
        argv[argv.index("--") : argv.index("--")] = ["--weight-push-timeout", str(bound)]
        argv += ["--max_steps", "5", "--save_steps", "1"]
        held = {"PYTHONPATH": f"{HERE / 'held_rank'}:{reward_env()['PYTHONPATH']}",
                "TRLSTACK_GPU_TEST_HELD_RANK": "1", "TRLSTACK_GPU_TEST_HELD_PUSH": "2"}  # fmt: skip
        with log.open("w") as sink:
            env = reward_env() | {"CUDA_VISIBLE_DEVICES": layout.train_gpus} | held
            trainer = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
            try:
                wait_in_log(log, trainer, "keeps out of weight push 2")
                held_at = time.monotonic()
                code = trainer.wait(timeout=bound + 120)  # the bound, then torch elastic ends the other rank
                took = time.monotonic() - held_at
            finally:
                if trainer.poll() is None:
                    trainer.kill()
    finally:
        stop(server, grace=30)  # left inside the push the trainer gave up on: SIGTERM alone does not end it
    text = log.read_text()
    print(f"the run ended {took:.0f} s after rank 1 kept out of the push (bound {bound} s), exit {code}")
    lines = [line for line in text.splitlines() if "has not finished in" in line]
    print("\n".join(lines))
    assert code != 0, text[-4000:]
    stuck = f"train: rank 0: the weight push to vLLM has not finished in {bound} s (--weight-push-timeout); "
    assert stuck + "stuck while " in text, text[-4000:]
    assert took < bound + 90, text[-4000:]
    # Nothing saved is lost: step 1's checkpoint, written before the stuck push, is whole.
    assert shards(output / "checkpoint-1") == ["__0_0.distcp", "__1_0.distcp"]
    assert (output / "checkpoint-1" / "trainer_state.json").is_file()
