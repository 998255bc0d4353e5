"""serve-vllm on one GPU: real vLLM with TRL's flags answers OpenAI completions and offers weight transfer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
from gpu_env import missing

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def server(tiny, tmp_path_factory):
    """serve-vllm on the tiny model, healthy; yields its URL; stops the whole process group afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "VLLM_USE_FLASHINFER_SAMPLER": os.environ.get("VLLM_USE_FLASHINFER_SAMPLER", "0")}
    argv = [
        "serve-vllm",
        "--model",
        str(tiny / "model"),
        "--port",
        str(port),
        "--gpu-memory-utilization",
        "0.3",
    ]
    process = subprocess.Popen(
        argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 600
        while True:
            assert process.poll() is None, (
                f"serve-vllm exited ({process.returncode}):\n{log.read_text()[-4000:]}"
            )
            assert time.monotonic() < deadline, f"no 200 from /health in 600 s:\n{log.read_text()[-4000:]}"
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(1)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=120)


def test_answers_an_openai_completion(server, tiny):
    from openai import OpenAI

    client = OpenAI(base_url=f"{server}/v1", api_key="unused")
    (model,) = [entry.id for entry in client.models.list().data]
    assert model == str(tiny / "model")
    # Forced length: a random model may sample EOS at once, and an empty answer would prove little.
    reply = client.completions.create(
        model=model,
        prompt="The capital of France is",
        max_tokens=8,
        extra_body={"min_tokens": 8, "ignore_eos": True},
    )
    assert reply.usage.completion_tokens == 8
    assert reply.choices[0].text


def test_runs_with_trls_flags_and_offers_weight_transfer(server):
    info = get_json(f"{server}/server_info?config_format=json")
    assert info["vllm_config"]["weight_transfer_config"]["backend"] == "nccl"
    assert info["vllm_config"]["model_config"]["logprobs_mode"] == "processed_logprobs"
    routes = get_json(f"{server}/openapi.json")["paths"]
    assert {"/init_weight_transfer_engine", "/update_weights", "/get_world_size"} <= routes.keys()
    assert get_json(f"{server}/get_world_size")["world_size"] == 1
