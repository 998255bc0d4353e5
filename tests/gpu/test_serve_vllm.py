"""serve-vllm on one GPU: real vLLM with TRL's flags answers OpenAI completions and offers weight transfer."""

from __future__ import annotations

import json
import urllib.request

import pytest
from gpu_env import free_port, missing, start_server, stop, wait_healthy

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def server(tiny, tmp_path_factory):
    """serve-vllm on the tiny model, healthy; yields its URL; stops the whole process group afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    process = start_server(tiny / "model", port, log)
    try:
        wait_healthy(url, process, log)
        yield url
    finally:
        stop(process)


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


def test_samples_with_top_k_and_top_p(server, tiny):
    # A request with top-k/top-p and no log-probabilities is the one vLLM would hand to FlashInfer's sampler,
    # whose kernels the shipped wheels cannot compile (it ended the engine); serve-vllm keeps vLLM's own.
    from openai import OpenAI

    client = OpenAI(base_url=f"{server}/v1", api_key="unused")
    reply = client.completions.create(
        model=str(tiny / "model"),
        prompt="The capital of France is",
        max_tokens=8,
        n=4,
        temperature=1.0,
        top_p=0.9,
        extra_body={"top_k": 20, "min_tokens": 8, "ignore_eos": True},
    )
    assert reply.usage.completion_tokens == 32
    assert all(choice.text for choice in reply.choices)


def test_runs_with_trls_flags_and_offers_weight_transfer(server):
    info = get_json(f"{server}/server_info?config_format=json")
    assert info["vllm_config"]["weight_transfer_config"]["backend"] == "nccl"
    assert info["vllm_config"]["model_config"]["logprobs_mode"] == "processed_logprobs"
    routes = get_json(f"{server}/openapi.json")["paths"]
    assert {"/init_weight_transfer_engine", "/update_weights", "/get_world_size"} <= routes.keys()
    assert get_json(f"{server}/get_world_size")["world_size"] == 1
