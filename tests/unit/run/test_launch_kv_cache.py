"""train --vllm-kv-cache-gib: each rank's colocated vLLM engine gets a fixed KV cache (rank/kv_cache.py),
which lets several colocated ranks share a GPU (--ranks-per-gpu); engines that cannot all start on one GPU
are refused before anything starts, with the numbers; the memory estimate leaves each engine its share."""

from __future__ import annotations

import pytest
import yaml
from launch_harness import GRPO, gpus
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.recipes import RECIPES
from trlstack.run.launch import build_launch
from trlstack.run.settings import TrainSettings

H200 = [Gpu(0, uuid="GPU-0", compute_capability=(9, 0), memory_bytes=140 << 30)]
SMALL = {
    "model_type": "qwen2", "vocab_size": 1024, "hidden_size": 128, "intermediate_size": 256,
    "num_hidden_layers": 2, "num_attention_heads": 2,
}  # fmt: skip


def colocate(**more):
    return TrainSettings(recipe="grpo", vllm_mode="colocate", **more)


def test_every_rank_gets_the_size_and_the_log_says_so():
    launch = build_launch(colocate(ranks_per_gpu=2, vllm_kv_cache_gib=1.5), GRPO, "g", H200)
    assert launch.command.env["TRLSTACK_VLLM_KV_CACHE_GIB"] == "1.5"
    assert launch.processes == 2
    assert (
        "each rank's vLLM engine holds a fixed 1.5 GiB KV cache (--vllm-kv-cache-gib), not one sized from "
        "the memory vLLM profiles free at start-up"
    ) in launch.notes


def test_unset_vllm_sizes_the_cache_as_before():
    launch = build_launch(colocate(), GRPO, "g", H200)
    assert "TRLSTACK_VLLM_KV_CACHE_GIB" not in launch.command.env
    assert not any("KV cache" in note for note in launch.notes)


def test_one_rank_may_fix_its_cache_too():
    launch = build_launch(colocate(vllm_kv_cache_gib=4.0), GRPO, "g", gpus(1))  # memory unknown: no bound
    assert launch.command.env["TRLSTACK_VLLM_KV_CACHE_GIB"] == "4.0"


def test_engines_whose_start_up_shares_add_up_to_the_gpu_are_refused():
    online_dpo = yaml.safe_load(RECIPES["online-dpo"].bundled_config.read_text())  # TRL's 0.55 share
    settings = TrainSettings(
        recipe="online-dpo", vllm_mode="colocate", ranks_per_gpu=2, vllm_kv_cache_gib=1.0
    )
    with pytest.raises(UsageError, match=r"starts 2 vLLM engines on each GPU.*2 x 0.55 leaves the trainers"):
        build_launch(settings, online_dpo, "o", H200)
    lowered = {**online_dpo, "vllm_gpu_memory_utilization": 0.2}
    assert build_launch(settings, lowered, "o", H200).processes == 2


def test_a_cache_larger_than_the_engines_share_of_the_gpu_is_refused():
    config = {**GRPO, "vllm_gpu_memory_utilization": 0.1}  # 14 GiB of 140 for each engine
    with pytest.raises(UsageError, match=r"--vllm-kv-cache-gib 20 .* more than the 14.0 GiB that vllm_gpu_"):
        build_launch(colocate(vllm_kv_cache_gib=20.0), config, "g", H200)
    assert build_launch(colocate(vllm_kv_cache_gib=12.0), config, "g", H200).processes == 1


def test_the_estimate_leaves_every_colocated_engine_its_share():
    config = {**GRPO, "vllm_gpu_memory_utilization": 0.25}
    alone = build_launch(colocate(), config, "g", H200, model_config=SMALL)
    two = build_launch(
        colocate(ranks_per_gpu=2, vllm_kv_cache_gib=2.0), config, "g", H200, model_config=SMALL
    )
    assert any("105.0 GiB per GPU for training (0.25 of 140.0 GiB left to vLLM)" in n for n in alone.notes)
    # two engines at 0.25 of the whole GPU each: 70 GiB for vLLM, 35 GiB for each of the two trainers
    assert any("35.0 GiB per GPU for training (0.5 of 70.0 GiB left to vLLM)" in n for n in two.notes), (
        two.notes
    )


def test_the_share_given_after_the_double_dash_is_the_one_weighed():
    """TRL's script takes the values after `--` over the config file's: so do the refusal and the estimate."""
    over = colocate(ranks_per_gpu=2, vllm_kv_cache_gib=1.0, extra=["--vllm_gpu_memory_utilization", "0.6"])
    with pytest.raises(UsageError, match=r"2 x 0.6 leaves the trainers nothing"):
        build_launch(over, GRPO, "g", H200)
    abbreviated = colocate(ranks_per_gpu=2, vllm_kv_cache_gib=1.0, extra=["--vllm_gpu_mem=0.25"])
    launch = build_launch(abbreviated, GRPO, "g", H200, model_config=SMALL)
    assert any("35.0 GiB per GPU for training" in note for note in launch.notes), launch.notes
    assert launch.command.argv[-1] == "--vllm_gpu_mem=0.25"  # passed on as given
    assert "vllm_gpu_memory_utilization" not in launch.config  # the file keeps the config's own
