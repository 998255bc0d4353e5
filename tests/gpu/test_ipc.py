"""The weight push through CUDA IPC where the two roles share a GPU: serve-vllm and train with --share-gpus
(`--weight-transfer auto` picks ipc for both), as the compose main job runs them on one GPU. The server starts
vLLM's IPC engine; every training rank hands it CUDA-IPC handles to its own GPU memory; the server generates
with the pushed weights. grpo five steps and async-grpo ten, rloo and online-dpo two; a server wedged while
loading ends the run within the push's bound, naming the phase. On the tiny model and the reward it earns in
varying amounts (rewards.py); two FSDP2 ranks on the one GPU too. Needs vLLM, TRL and one GPU.

    uv run --frozen --extra gpu pytest tests/gpu/test_ipc.py -v
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import test_async_grpo
import test_server_mode
import test_train_fsdp
from gpu_env import HERE, Layout, free_port, max_weight_change, missing, start_server, stop, wait_healthy
from test_server_mode import Served, checkpoints, fixed_sequence, losses, server_logprobs, trainer_logprobs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]

SHARED = Layout("shared-gpu-ipc", serve_gpus="0", train_gpus="0", share=True, needs_gpus=1)  # auto: ipc
SERVER_ENGINE = "Creating weight transfer engine: InPlaceIPCEngine"  # vllm_engine.py
TRAINER_PUSH = "train: weights reach the vLLM server through CUDA IPC (TRLSTACK_WEIGHT_TRANSFER=ipc)"
STUCK_PHASE = "stuck while waiting for the vLLM server to load the parameters up to "


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    """One CUDA-IPC server for the module's runs, on the GPU the trainers share."""
    port = free_port()
    log = tmp_path_factory.mktemp("ipc-server") / "server.log"
    process = start_server(tiny / "model", port, log, gpus=SHARED.serve_gpus, flags=SHARED.flags)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        assert SERVER_ENGINE in log.read_text(), "serve-vllm --share-gpus did not start trlstack's IPC engine"
        yield Served(SHARED, url, process, log)
    finally:
        stop(process)


def follows(served: Served, saved: list[Path], tiny: Path, before: list[float]) -> list[float]:
    """The server's log-probabilities moved, and match a saved checkpoint's: the distances to each."""
    token_ids, prompt_length = fixed_sequence(tiny)
    after = server_logprobs(served.url, token_ids, prompt_length)
    moved = max(abs(a - b) for a, b in zip(before, after, strict=True))
    assert moved > 1e-3, "the server's weights never changed"
    return [
        max(abs(a - b) for a, b in zip(after, trainer_logprobs(c, token_ids, prompt_length), strict=True))
        for c in saved
    ]


def test_grpo_pushes_five_steps_through_cuda_ipc_and_the_server_follows(served, tiny, tmp_path):
    before = server_logprobs(served.url, *fixed_sequence(tiny))
    output, log = tmp_path / "out", tmp_path / "train.log"
    result = test_server_mode.train(tiny, served, output, log)
    text = log.read_text()
    assert result.returncode == 0, text[-4000:]
    assert TRAINER_PUSH in text and "weight transfer ipc (--weight-transfer auto)" in text
    saved = checkpoints(output)
    assert len(saved) == test_server_mode.STEPS
    assert max_weight_change(tiny / "model", saved[0]) > 1e-4, "the first step did not change the weights"
    assert max_weight_change(saved[0], saved[-1]) > 1e-4, "later steps did not change the weights"
    distances = follows(served, saved, tiny, before)
    # The server holds the weights of the last step that generated; one of the saved checkpoints is that step.
    assert min(distances) < 0.05, f"no checkpoint matches the server's logprobs: {distances}"
    assert len(losses(saved[-1])) == test_server_mode.STEPS


def test_async_grpo_pushes_ten_steps_through_cuda_ipc_and_the_server_ends_on_the_last(served, tiny, tmp_path):
    before = server_logprobs(served.url, *fixed_sequence(tiny))
    output, log = tmp_path / "out", tmp_path / "train.log"
    result = test_async_grpo.train(tiny, served, output, log)
    text = log.read_text()
    assert result.returncode == 0, text[-4000:]
    assert TRAINER_PUSH in text
    saved = checkpoints(output)
    assert [int(c.name.split("-")[1]) for c in saved] == list(range(1, test_async_grpo.STEPS + 1))
    assert max_weight_change(tiny / "model", saved[-1]) > 1e-4, "the weights did not change"
    # The last sync follows the last step: the server holds the weights the run ended with.
    assert follows(served, saved, tiny, before)[-1] < 0.05


@pytest.mark.parametrize("recipe", ["rloo", "online-dpo"])
def test_rloo_and_online_dpo_train_two_steps_through_cuda_ipc(served, tiny, tmp_path, recipe):
    output, log = tmp_path / "out", tmp_path / "train.log"
    result = test_server_mode.train(tiny, served, output, log, steps=2, recipe=recipe)
    text = log.read_text()
    assert result.returncode == 0, text[-4000:]
    assert TRAINER_PUSH in text
    saved = checkpoints(output)
    assert [int(c.name.split("-")[1]) for c in saved] == [1, 2] and len(losses(saved[-1])) == 2
    assert max_weight_change(tiny / "model", saved[-1]) > 1e-4, f"{recipe} did not change the weights"


def test_two_fsdp2_ranks_on_the_gpu_each_hand_over_their_copy_and_the_server_follows(served, tiny, tmp_path):
    # Two ranks on the one GPU (--ranks-per-gpu 2, FSDP2): each gathers every parameter whole and shares its
    # copy; vLLM's sender all-gathers the ranks' handles and the first rank posts them.
    before = server_logprobs(served.url, *fixed_sequence(tiny))
    output, log = tmp_path / "out", tmp_path / "train.log"
    argv = test_train_fsdp.server_argv(tiny, served, output)
    done = test_train_fsdp.run(argv, log, served.layout.train_gpus, "--max_steps", "3", "--save_steps", "3")
    text = log.read_text()
    assert done.returncode == 0, text[-4000:]
    assert TRAINER_PUSH in text
    assert test_train_fsdp.shards(output / "checkpoint-3") == ["__0_0.distcp", "__1_0.distcp"]
    assert max_weight_change(tiny / "model", output) > 1e-4, "the weights did not change"
    after = server_logprobs(served.url, *fixed_sequence(tiny))
    assert max(abs(a - b) for a, b in zip(before, after, strict=True)) > 1e-3, "the server never changed"


def test_a_server_wedged_while_loading_ends_the_run_within_the_bound_naming_the_phase(
    tiny, tmp_path, monkeypatch
):
    # A server of its own, whose second weight load never returns (held_server/sitecustomize.py).
    port, bound = free_port(), 30
    # before whatever the environment already puts there (an install on PYTHONPATH: the offline bundle)
    kept = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(HERE / "held_server"), str(HERE), kept]))
    )
    monkeypatch.setenv("TRLSTACK_GPU_TEST_HELD_LOAD", "2")
    served = Served(SHARED, f"http://127.0.0.1:{port}", None, tmp_path / "server.log")  # type: ignore[arg-type]
    server = start_server(tiny / "model", port, served.log, gpus=SHARED.serve_gpus, flags=SHARED.flags)
    monkeypatch.delenv("TRLSTACK_GPU_TEST_HELD_LOAD")  # the server's alone
    output, log = tmp_path / "out", tmp_path / "stuck.log"
    try:
        wait_healthy(served.url, server, served.log)
        argv = test_server_mode.train_argv(tiny, served, output)
        argv[argv.index("--") : argv.index("--")] = ["--weight-push-timeout", str(bound)]
        argv += ["--max_steps", "5", "--save_steps", "1"]
        with log.open("w") as sink:
            trainer = subprocess.Popen(argv, env=SHARED.train_env(), stdout=sink, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 600
                while "the server holds weight load 2" not in served.log.read_text():
                    assert trainer.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                    time.sleep(0.2)
                held_at = time.monotonic()
                code = trainer.wait(timeout=bound + 120)
                took = time.monotonic() - held_at
            finally:
                if trainer.poll() is None:
                    trainer.kill()
    finally:
        stop(server, grace=10)  # its worker sleeps inside the load: SIGTERM alone does not end it
    text = log.read_text()
    print(f"the run ended {took:.0f} s after the server held its load (bound {bound} s), exit {code}")
    print("\n".join(line for line in text.splitlines() if "has not finished in" in line))
    assert code != 0, text[-4000:]
    stuck = f"train: rank 0: the weight push to vLLM has not finished in {bound} s (--weight-push-timeout); "
    assert stuck + STUCK_PHASE in text, text[-4000:]
    assert "from this GPU's memory (HTTP /update_weights, CUDA IPC)" in text
    assert took < bound + 60, text[-4000:]
    # Nothing saved is lost: step 1's checkpoint, written before the stuck push, is whole.
    assert (output / "checkpoint-1" / "trainer_state.json").is_file()


@pytest.mark.parametrize(
    ("packed", "in_place"),
    [(False, True), (True, True), (True, False)],
    ids=["unpacked-in-place", "packed-in-place", "packed-layerwise"],
)
def test_changed_weights_pushed_each_way_are_the_ones_the_server_scores_with(
    served, tiny, tmp_path, packed, in_place
):
    """rank/ipc_push.send as a rank calls it, one handle per parameter (train's choice beyond one buffer) or
    packed, the server loading in place (trlstack's engine) or through vLLM's layerwise reload: the server's
    log-probabilities then match the changed model's own, not the model it started with."""
    import torch
    from transformers import AutoModelForCausalLM
    from trlstack.rank import ipc_push
    from trlstack.rank.ipc_server import Server

    token_ids, prompt_length = fixed_sequence(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny / "model", dtype=torch.bfloat16).to("cuda:0")
    generator = torch.Generator(device="cuda:0").manual_seed(7 + 2 * packed + in_place)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(
                torch.randn(param.shape, generator=generator, device="cuda:0", dtype=param.dtype) * 0.05
            )
    changed = tmp_path / "changed"
    model.save_pretrained(changed)
    server = Server(served.url)
    server.join("ipc", in_place=in_place)
    buffer = ipc_push.buffer_bytes(
        ipc_push.largest_parameter(model), ipc_push.PACKED_BUFFER_BYTES if packed else None
    )
    try:
        ipc_push.send(((name, param.data) for name, param in model.named_parameters()), server, buffer)
    finally:
        server.join("ipc")  # the engine's default again for the module's other runs
    after = server_logprobs(served.url, token_ids, prompt_length)
    to_changed = max(
        abs(a - b) for a, b in zip(after, trainer_logprobs(changed, token_ids, prompt_length), strict=True)
    )
    to_start = max(
        abs(a - b)
        for a, b in zip(after, trainer_logprobs(tiny / "model", token_ids, prompt_length), strict=True)
    )
    assert to_changed < 0.05 < to_start, (to_changed, to_start)
