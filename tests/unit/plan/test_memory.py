"""plan/memory.py: parameters counted from config.json alone, against the published sizes of Qwen2.5 worked by
hand; the bytes a training run holds per parameter, what DDP and FSDP2 add, and the estimate held against the
peaks measured on an H200 (bench/results/gpu_fsdp.json)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from trlstack.plan import memory

BENCH = Path(__file__).resolve().parents[3] / "bench"

QWEN = {"model_type": "qwen2", "vocab_size": 151936, "num_key_value_heads": 2, "tie_word_embeddings": True}
QWEN_05B = {
    **QWEN,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
}
QWEN_15B = {
    **QWEN,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
}
QWEN_7B = {
    **QWEN, "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "tie_word_embeddings": False,
}  # fmt: skip


def by_hand(vocab, hidden, inner, layers, heads, kv, tied):
    """Embeddings, each layer's q/k/v (with biases) and o, gate/up/down, two norms; final norm; LM head."""
    head_dim = hidden // heads
    q, kv_proj = hidden * hidden + hidden, hidden * kv * head_dim + kv * head_dim
    layer = q + 2 * kv_proj + hidden * hidden + 3 * hidden * inner + 2 * hidden
    return vocab * hidden * (1 if tied else 2) + layers * layer + hidden


@pytest.mark.parametrize(
    ("config", "published", "hand"),
    [
        (QWEN_05B, 494_032_768, by_hand(151936, 896, 4864, 24, 14, 2, True)),  # "0.49B"
        (QWEN_15B, 1_543_714_304, by_hand(151936, 1536, 8960, 28, 12, 2, True)),  # "1.54B"
        (QWEN_7B, 7_615_616_512, by_hand(152064, 3584, 18944, 28, 28, 4, False)),  # "7.61B"
    ],
)
def test_qwen25_shapes_count_to_their_published_sizes(config, published, hand):
    assert hand == published
    assert memory.count_parameters(config)[0] == published


def test_the_count_splits_into_fsdp2s_root_unit_and_its_layers():
    # a 1.5B layer by hand: q (biased), k and v (2 heads of 128, biased), o, gate/up/down, two norms
    layer = (1536 * 1536 + 1536) + 2 * (1536 * 256 + 256) + 1536 * 1536 + 3 * 1536 * 8960 + 2 * 1536
    counted, how = memory.count(QWEN_15B)
    assert counted is not None and how == counted.how
    # tied: the embeddings once, and the final norm
    assert (counted.root, counted.layer, counted.layers) == (151936 * 1536 + 1536, layer, 28)
    assert (counted.root, counted.layer) == (233_375_232, 46_797_824)
    assert counted.total == 1_543_714_304 == memory.count_parameters(QWEN_15B)[0]
    untied, _ = memory.count(QWEN_7B)
    assert untied is not None and untied.root == 2 * 152064 * 3584 + 3584 == 1_089_998_336  # the LM head too
    assert untied.layer == 233_057_792 and untied.root + 28 * untied.layer == 7_615_616_512


def test_llama_counts_without_biases_unless_it_says_so():
    llama = {**QWEN_05B, "model_type": "llama"}
    plain = memory.count_parameters(llama)[0]
    biased = memory.count_parameters({**llama, "attention_bias": True})[0]
    assert biased - plain == 24 * (14 + 2 * 2) * 64 and plain == 494_032_768 - 24 * (14 + 2 * 2) * 64


def test_qwen3_adds_its_q_and_k_norms_and_a_head_dim_of_its_own():
    qwen3 = {**QWEN_05B, "model_type": "qwen3", "head_dim": 128}
    wide = memory.count_parameters(qwen3)[0]
    assert wide == by_hand(151936, 896, 4864, 24, 14, 2, True) + 24 * (
        896 * 14 * 64 * 2 + 896 * 2 * 64 * 2 - (14 + 4) * 64 + 2 * 128
    )


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({**QWEN_05B, "model_type": "gpt2"}, "model_type 'gpt2' is not one counted here"),
        ({**QWEN_05B, "model_type": None}, "model_type None"),
        ({k: v for k, v in QWEN_05B.items() if k != "hidden_size"}, "lacks a positive hidden_size"),
        ({**QWEN_05B, "num_hidden_layers": 0}, "lacks a positive num_hidden_layers"),
        ({**QWEN_05B, "num_hidden_layers": True}, "lacks a positive num_hidden_layers"),
        ({**QWEN_05B, "vocab_size": "151936"}, "lacks a positive vocab_size"),
        ({**QWEN_05B, "num_experts": 8}, "mixture of experts"),
        ({}, "model_type None"),
    ],
)
def test_a_config_that_cannot_be_counted_says_why_instead_of_guessing(config, why):
    count, how = memory.count_parameters(config)
    assert count is None and why in how


def test_trls_float32_default_costs_16_bytes_a_parameter_and_what_ddp_and_fsdp2_add():
    estimate, _ = memory.estimate(QWEN_7B, "grpo", {})
    assert estimate is not None
    assert (estimate.dtype, estimate.trained, estimate.reference) == ("float32", 16, 0)
    assert estimate.states == 7_615_616_512 * 16
    # DDP: + 4 bytes of gradient buckets (float32) + 2 of autocast's bf16 copy of the weights
    assert (estimate.buckets, estimate.autocast) == (4, 2)
    assert estimate.total == 7_615_616_512 * 22 == estimate.per_process(sharded=False, processes=2)
    # FSDP2: half the states, and the root unit and two layers whole in bf16, weights and gradients
    gathered = (1_089_998_336 + 2 * 233_057_792) * 2 * 2
    assert estimate.gathered == gathered == 6_224_455_680
    assert estimate.per_process(sharded=True, processes=2) == 7_615_616_512 * 8 + gathered
    shown = estimate.describe()
    assert "7.62B parameters x 16 bytes" in shown and "113.5 GiB" in shown
    assert "DDP adds 4 bytes each for its gradient buckets + 2 for autocast's copy of the weights" in shown
    assert "FSDP2 adds 5.8 GiB held gathered (the root unit and 2 layers" in shown


@pytest.mark.parametrize(
    ("config", "buckets", "autocast", "compute"),
    [
        ({}, 4, 2, 2),  # neither set: train's policy turns bf16 (or fp16) on for every GPU
        ({"bf16": True}, 4, 2, 2),
        ({"fp16": True}, 4, 2, 2),
        ({"bf16": False, "fp16": False}, 4, 0, 4),  # float32 throughout: nothing cast
        ({"bf16": False}, 4, 0, 4),  # TRL: bf16 false and fp16 unset (false) is float32
        ({"model_init_kwargs": {"dtype": "bfloat16"}}, 2, 0, 2),  # bf16 weights: nothing to cast
        ({"model_init_kwargs": {"dtype": "bfloat16"}, "bf16": False}, 2, 0, 2),
    ],
)
def test_what_ddp_and_fsdp2_add_follows_the_precision(config, buckets, autocast, compute):
    estimate, _ = memory.estimate(QWEN_15B, "grpo", config)
    assert estimate is not None
    assert (estimate.buckets, estimate.autocast, estimate.compute) == (buckets, autocast, compute)
    assert estimate.gathered == (233_375_232 + 2 * 46_797_824) * compute * 2
    assert estimate.total == 1_543_714_304 * (estimate.trained + buckets + autocast)
    if not autocast:
        assert "autocast" not in estimate.describe()


def test_a_reference_model_is_sharded_with_the_states_and_adds_nothing_gathered():
    estimate, _ = memory.estimate(QWEN_15B, "grpo", {"beta": 0.04})
    assert estimate is not None and estimate.reference == 4
    assert estimate.per_process(sharded=True, processes=4) == 1_543_714_304 * 20 // 4 + 1_307_883_520
    assert estimate.total == 1_543_714_304 * (16 + 4 + 6)


@pytest.mark.parametrize(
    ("recipe", "config", "reference"),
    [
        ("grpo", {}, 0),
        ("grpo", {"beta": 0.04}, 4),
        ("rloo", {}, 4),
        ("rloo", {"beta": 0}, 0),
        ("online-dpo", {}, 4),
    ],
)
def test_a_reference_model_is_counted_where_the_recipe_loads_one(recipe, config, reference):
    estimate, _ = memory.estimate(QWEN_05B, recipe, config)
    assert estimate is not None and estimate.reference == reference


@pytest.mark.parametrize(
    ("kwargs", "dtype", "trained"),
    [
        ({"dtype": "bfloat16"}, "bfloat16", 8),
        ({"torch_dtype": "float16"}, "float16", 8),
        ({"dtype": "float32"}, "float32", 16),
        ({"attn_implementation": "sdpa"}, "float32", 16),
    ],
)
def test_the_weights_dtype_comes_from_model_init_kwargs(kwargs, dtype, trained):
    estimate, _ = memory.estimate(QWEN_05B, "grpo", {"model_init_kwargs": kwargs})
    assert estimate is not None and (estimate.dtype, estimate.trained) == (dtype, trained)


def test_the_configs_own_dtype_counts_where_model_init_kwargs_sets_none():
    # grpo.py, rloo.py and our online_dpo put ModelConfig's `dtype` in model_init_kwargs; AsyncGRPOTrainer its
    # config's (recipes/async_grpo.yaml: bfloat16). model_init_kwargs wins over both.
    assert memory.weights_dtype({"dtype": "bfloat16"}) == "bfloat16"
    assert memory.weights_dtype({"dtype": "bfloat16", "model_init_kwargs": {"dtype": "float32"}}) == "float32"


def test_auto_dtype_is_the_models_own_and_an_odd_one_is_unknown():
    assert memory.weights_dtype({"model_init_kwargs": {"dtype": "auto"}}, {"dtype": "bfloat16"}) == "bfloat16"
    assert memory.weights_dtype({"model_init_kwargs": {"dtype": "auto"}}, {}) == "float32"
    estimate, why = memory.estimate(QWEN_05B, "grpo", {"model_init_kwargs": {"dtype": "int8"}})
    assert estimate is None and "model_init_kwargs.dtype" in why


def test_an_adapter_run_is_not_estimated():
    estimate, why = memory.estimate(QWEN_05B, "grpo", {"use_peft": True})
    assert estimate is None and "use_peft" in why


def test_vllms_share_of_a_gpu_it_runs_on():
    assert memory.vllm_share("colocate", {}, "grpo", None) == 0.3
    assert memory.vllm_share("colocate", {}, "online-dpo", None) == 0.55
    assert memory.vllm_share("colocate", {"vllm_gpu_memory_utilization": 0.4}, "grpo", None) == 0.4
    assert memory.vllm_share("server", {}, "grpo", 0.3) == 0.3
    assert memory.vllm_share("server", {}, "grpo", None) == 0.0


def test_the_fewest_processes_that_fit():
    estimate, _ = memory.estimate(QWEN_7B, "grpo", {})
    assert estimate is not None
    # 121.85e9 bytes of states over what 6.22e9 gathered leaves: 80 GiB -> 79.7e9 (2), 40 GiB -> 36.7e9 (4)
    assert estimate.processes_needed(80 << 30) == 2
    assert estimate.processes_needed(40 << 30) == 4
    assert estimate.per_process(True, 3) > 40 << 30 >= estimate.per_process(True, 4)
    assert estimate.processes_needed(estimate.gathered) is None  # the gathered units alone fill it
    assert estimate.processes_needed(0) is None


@pytest.fixture
def bench(monkeypatch):
    """bench/gpu_fsdp.py, which imports children from bench/."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("gpu_fsdp")


def test_the_estimate_holds_against_the_peaks_measured_on_an_h200(bench):
    """Within 15% of each measured peak; above the floor where DDP ran out of memory. The committed JSON's
    estimates are this code's."""
    report = json.loads((BENCH / "results" / "gpu_fsdp.json").read_text())
    cases = {(case["model"], case["sharding"]): case for case in report["results"]}
    assert set(cases) == {(model, sharding) for model in bench.SHAPES for sharding in ("none", "fsdp2")}
    for (model, sharding), case in cases.items():
        estimated = bench.estimated(model, sharding)
        assert case["estimate_bytes"] == estimated
        assert case["estimate_vs_measured"] == bench.versus(case)
        if case["status"] == "ok":
            assert abs(estimated / case["peak_bytes"] - 1) <= 0.15, (model, sharding)
        else:
            assert case["status"] == "oom" and estimated >= case["peak_at_least_bytes"], (model, sharding)
    assert cases["qwen2.5-7b", "none"]["status"] == "oom"  # the case the floor stands for
    assert cases["qwen2.5-1.5b", "none"]["estimate_bytes"] == 1_543_714_304 * 22
    assert cases["qwen2.5-7b", "fsdp2"]["estimate_bytes"] == 7_615_616_512 * 8 + 6_224_455_680
