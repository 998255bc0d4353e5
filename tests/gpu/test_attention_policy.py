"""The precision and attention policy (trlstack.policy) on this GPU, and against the measured benchmark.

On the GPU: what the policy picks loads and trains (forward and backward, finite loss and gradients) in the
precision it picks. Anywhere: for the GPU the attention benchmark ran on, the policy's choice when no Hub
kernel can be had is within 10% of the fastest implementation trlstack ships, and its precision the faster
one.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from gpu_env import cuda_devices
from trlstack import policy
from trlstack.gpus import Gpu, visible_gpus

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "gpu_attention.json"
SHIPPED = {"eager", "sdpa", "flex_attention"}  # built into transformers/torch; flash-attn-4 is not in uv.lock


def no_hub(_: str) -> str:
    return "no Kernels Hub here"


@pytest.mark.gpu
@pytest.mark.skipif(cuda_devices() == 0, reason="no CUDA GPU (the driver shows none)")
@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="gpu extra not installed: transformers missing"
)
def test_the_policy_choice_trains_here(tiny):
    import torch
    from transformers import AutoModelForCausalLM

    gpus = visible_gpus()
    precision, why = policy.precision(gpus)
    implementation, notes = policy.choose_attention(gpus, policy.hub_kernel_unavailable)
    capability = torch.cuda.get_device_capability(0)
    if capability >= (8, 0):
        assert precision == "bf16", why
    model = AutoModelForCausalLM.from_pretrained(tiny / "model", attn_implementation=implementation).cuda()
    assert model.config._attn_implementation == implementation, notes
    ids = torch.randint(0, model.config.vocab_size, (4, 256), device="cuda")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert math.isfinite(loss.item())
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.skipif(not RESULTS.exists(), reason=f"no attention benchmark results at {RESULTS}")
def test_the_policy_follows_the_attention_benchmark():
    report = json.loads(RESULTS.read_text())
    major, minor = report["environment"]["capability"].removeprefix("sm_")
    gpus = [Gpu(0, compute_capability=(int(major), int(minor)))]
    precision, _ = policy.precision(gpus)
    implementation, _ = policy.choose_attention(gpus, no_hub)
    speed = {
        (case["attention"], case["precision"]): case["tokens_per_s"]
        for case in report["results"]
        if case["status"] == "ok"
    }
    best = max(v for (name, p), v in speed.items() if name in SHIPPED and p == precision)
    assert speed[(implementation, precision)] >= 0.9 * best, (implementation, precision, speed)
    other = {"bf16": "fp32", "fp16": "fp32"}.get(precision)
    if other and (implementation, other) in speed:
        assert speed[(implementation, precision)] > speed[(implementation, other)]
