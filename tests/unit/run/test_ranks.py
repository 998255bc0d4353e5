"""run/ranks.py: what every training rank on this machine gets, decided before launch: how many ranks (none
without a GPU, no more than the GPUs hold), how ranks sharing a GPU meet over NCCL, the bound on each weight
push, and a colocated engine's fixed KV cache, refused with the numbers where the engines of one GPU cannot
all start."""

from __future__ import annotations

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.run.ranks import NO_GPU, fixed_kv_cache, push_bound, rank_sharing, training_processes
from trlstack.run.settings import TrainSettings

GIB = 1 << 30


def gpus(*indices: int, gib: int | None = None) -> list[Gpu]:
    return [Gpu(i, memory_bytes=gib * GIB if gib else None) for i in indices]


def settings(**fields) -> TrainSettings:
    return TrainSettings(recipe="grpo", **fields)


def test_one_rank_a_visible_gpu_unless_told_fewer_or_more_on_each():
    assert training_processes(settings(), gpus(0, 1, 2)) == 3
    assert training_processes(settings(num_processes=2), gpus(0, 1, 2)) == 2
    assert training_processes(settings(ranks_per_gpu=2), gpus(4, 5)) == 4


def test_no_gpu_is_refused_naming_every_way_on():
    with pytest.raises(UsageError) as error:
        training_processes(settings(), [])
    assert str(error.value) == NO_GPU
    for fix in ("`trlstack doctor`", "CUDA_VISIBLE_DEVICES", "--print-command --gpus N", "--cpu"):
        assert fix in NO_GPU


def test_more_ranks_than_the_gpus_hold_are_refused_naming_the_gpus_as_given():
    with pytest.raises(UsageError) as error:
        training_processes(settings(num_processes=3), gpus(2, 5))
    message = str(error.value)
    assert "needs a GPU each, but CUDA_VISIBLE_DEVICES=2,5 has 2; lower it" in message
    assert "--ranks-per-gpu" in message
    with pytest.raises(UsageError, match="needs a GPU for every 2, but CUDA_VISIBLE_DEVICES=0 has 1"):
        training_processes(settings(num_processes=3, ranks_per_gpu=2), gpus(0))


def test_the_ranks_are_told_how_many_share_a_gpu_even_when_one():
    assert rank_sharing(settings()) == ({"TRLSTACK_RANKS_PER_GPU": "1"}, [])
    env, notes = rank_sharing(settings(ranks_per_gpu=3))
    assert env == {"TRLSTACK_RANKS_PER_GPU": "3"}
    assert notes == [
        "3 training ranks on each GPU: each its own NCCL host (NCCL_HOSTID=...-rankN), so they talk over "
        "NCCL sockets and time-slice the GPU"
    ]


def test_every_rank_gets_the_bound_on_its_weight_push_and_the_log_says_it():
    default_env, _ = push_bound(settings())
    assert float(default_env["TRLSTACK_WEIGHT_PUSH_TIMEOUT"]) == settings().push_timeout > 0
    env, notes = push_bound(settings(weight_push_timeout=90.0))
    assert env == {"TRLSTACK_WEIGHT_PUSH_TIMEOUT": "90"}
    assert notes == [
        "each weight push to vLLM ends the run past 90 s (--weight-push-timeout), every rank naming what it "
        "is stuck in"
    ]


def test_unset_the_kv_cache_is_vllms_to_size():
    assert fixed_kv_cache(settings(ranks_per_gpu=4), gpus(0, gib=80), 0.9) == ({}, [])


def test_a_fixed_kv_cache_reaches_every_rank_and_the_log():
    env, notes = fixed_kv_cache(settings(vllm_kv_cache_gib=2.5, ranks_per_gpu=2), gpus(0, gib=80), 0.25)
    assert env == {"TRLSTACK_VLLM_KV_CACHE_GIB": "2.5"}
    assert notes == [
        "each rank's vLLM engine holds a fixed 2.5 GiB KV cache (--vllm-kv-cache-gib), not one sized from "
        "the memory vLLM profiles free at start-up"
    ]


def test_engines_of_one_gpu_whose_start_up_shares_fill_it_are_refused_with_the_numbers():
    with pytest.raises(UsageError) as error:
        fixed_kv_cache(settings(vllm_kv_cache_gib=1.0, ranks_per_gpu=3), gpus(0, gib=80), 0.4)
    assert str(error.value) == (
        "--ranks-per-gpu 3 with colocate starts 3 vLLM engines on each GPU, each starting only where "
        "vllm_gpu_memory_utilization (0.4) of the GPU's memory is free: 3 x 0.4 leaves the trainers nothing. "
        "Set vllm_gpu_memory_utilization below 0.33 (e.g. 0.17) in the config or after `--`."
    )
    fixed_kv_cache(settings(vllm_kv_cache_gib=1.0, ranks_per_gpu=3), gpus(0, gib=80), 0.3)  # 0.9 of it


def test_a_cache_larger_than_the_engines_share_of_the_smallest_gpu_is_refused_with_the_numbers():
    mixed = [*gpus(0, gib=80), *gpus(1, gib=40)]
    with pytest.raises(UsageError) as error:
        fixed_kv_cache(settings(vllm_kv_cache_gib=5.0), mixed, 0.1)
    assert str(error.value) == (
        "--vllm-kv-cache-gib 5 (TRLSTACK_VLLM_KV_CACHE_GIB) is more than the 4.0 GiB that "
        "vllm_gpu_memory_utilization (0.1) leaves each engine on a 40 GiB GPU, its weights included; lower "
        "it, or raise vllm_gpu_memory_utilization (in the config or after `--`)."
    )
    assert fixed_kv_cache(settings(vllm_kv_cache_gib=4.0), mixed, 0.1)[0] == {
        "TRLSTACK_VLLM_KV_CACHE_GIB": "4.0"
    }
    assert fixed_kv_cache(settings(vllm_kv_cache_gib=500.0), gpus(0), 0.1)[1]  # memory unknown: no bound
