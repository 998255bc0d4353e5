"""How much GPU memory training takes per process, from the model's config.json alone (no torch, no download):
the parameters counted from the architecture's sizes, times the bytes each parameter costs in training, plus
what DDP and FSDP2 each hold beside them.

What is counted: the model states (the trained model's weights, gradients and AdamW's two moments, and the
frozen reference model's weights where the recipe loads one), which every DDP process holds whole and FSDP2
shards over the processes; under DDP also its gradient buckets and autocast's bf16/fp16 copy of float32
weights; under FSDP2 also the units it holds gathered (the root unit and two decoder layers, their weights and
gradients in the compute dtype). Against the peaks measured on an H200 (bench/results/gpu_fsdp.json: Qwen2.5
1.5B and 7B shapes, batch 2 x 512) the estimate is 8% under to 3% over, and above the floor where DDP ran out
of memory. What is not counted, and is left to the headroom (`STATES_SHARE`): activations (they grow with
batch size, completion length and gradient checkpointing: most of what the estimate misses there), the CUDA
context and kernels' workspace, the allocator's fragmentation, and a vLLM that shares the GPU, whose share is
taken off the GPU's memory first (`vllm_share`).

A config that is not a decoder of the kinds counted here gives no estimate (`count_parameters` -> None and
why), never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1 << 30

# Bytes per parameter of the model being trained, by the dtype its weights load in: weights, gradients and
# AdamW's two moments, all in that dtype (torch's AdamW keeps its states in the parameter's dtype). TRL loads
# the weights in float32 unless model_init_kwargs.dtype says otherwise; bf16 mixed precision (autocast)
# computes in bf16 but keeps all four in float32: 16 bytes (its bf16 copies are counted apart, below).
TRAINED_BYTES = {"float32": 16, "bfloat16": 8, "float16": 8}
# One copy of the weights in their dtype: all a frozen reference model (the KL term) holds, and the size of
# DDP's gradient buckets.
WEIGHT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# What mixed precision (bf16 or fp16 autocast) computes in: 2 bytes a value.
MIXED_BYTES = 2
# The share of the trainer's memory on a GPU the counted bytes may take to be said to fit; the rest is for
# what is not counted (above). Beyond the whole of it a run cannot start at all.
STATES_SHARE = 0.7
# The recipes' KL coefficient when the config sets none (TRL 1.16's defaults): a non-zero one loads a
# reference model. Online DPO always keeps one (unless use_peft, which is not estimated).
DEFAULT_BETA = {"grpo": 0.0, "rloo": 0.05}
# vLLM's share of each GPU when it runs inside the trainer, when the config sets none (TRL 1.16's defaults).
DEFAULT_COLOCATE_SHARE = {"grpo": 0.3, "rloo": 0.3, "online-dpo": 0.55}
# FSDP2's units held whole at once: the root (never resharded between forward and backward) and two decoder
# layers (the one running and the next, prefetched).
GATHERED_LAYERS = 2

# The sizes of the default model's config.json (Qwen/Qwen2.5-0.5B-Instruct, defaults.DEFAULT_MODEL: 494M
# parameters), which the plan weighs where no model is named.
DEFAULT_MODEL_CONFIG = {
    "model_type": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}

# Decoders counted here: every layer an attention (q, k, v, o; q/k/v biased for Qwen2, q/k normed for Qwen3),
# a gated MLP (gate, up, down) and two RMSNorms; embeddings, a final norm, and an LM head unless tied.
QKV_BIAS = {"qwen2": True, "qwen3": False, "llama": None, "mistral": False}  # None: the attention_bias key
QK_NORM = {"qwen3"}
_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


def _positive(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class Counted:
    """A decoder's parameters as FSDP2 wraps them (accelerate: each decoder layer a unit, then the root):
    `root` (embeddings, the LM head unless tied, the final norm) and `layers` layers of `layer` each."""

    root: int
    layer: int
    layers: int
    how: str

    @property
    def total(self) -> int:
        return self.root + self.layers * self.layer


def count(config: Mapping[str, Any]) -> tuple[Counted | None, str]:
    """(the parameters of the model `config` describes, by unit; how they were counted), or (None, why
    not)."""
    kind = config.get("model_type")
    if kind not in QKV_BIAS:
        known = ", ".join(sorted(QKV_BIAS))
        return None, f"model_type {kind!r} is not one counted here ({known})"
    if config.get("num_experts") or config.get("num_local_experts"):
        return None, "a mixture of experts is not counted here"
    sizes = {key: _positive(config, key) for key in _SIZES}
    absent = [key for key, value in sizes.items() if value is None]
    if absent:
        return None, f"config.json lacks a positive {', '.join(absent)}"
    vocab, hidden, inner, layers, heads = (int(sizes[key] or 0) for key in _SIZES)
    kv_heads = _positive(config, "num_key_value_heads") or heads
    head_dim = _positive(config, "head_dim") or hidden // heads
    bias = QKV_BIAS[kind]
    if bias is None:
        bias = bool(config.get("attention_bias", False))
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    attention += (heads + 2 * kv_heads) * head_dim if bias else 0
    attention += 2 * head_dim if kind in QK_NORM else 0
    mlp = 3 * hidden * inner + (2 * inner + hidden if config.get("mlp_bias") else 0)
    layer = attention + mlp + 2 * hidden
    tied = bool(config.get("tie_word_embeddings", False))  # transformers' default for all four
    root = vocab * hidden * (1 if tied else 2) + hidden
    tied_note = ", tied embeddings" if tied else ""
    how = f"{kind}: {layers} layers of {hidden}, vocabulary {vocab}{tied_note}"
    counted = Counted(root, layer, layers, how)
    return counted, counted.how


def count_parameters(config: Mapping[str, Any]) -> tuple[int | None, str]:
    """(the parameter count of the model `config` describes, how it was counted), or (None, why not)."""
    counted, why = count(config)
    return (None, why) if counted is None else (counted.total, counted.how)


def weights_dtype(config: Mapping[str, Any], model_config: Mapping[str, Any] | None = None) -> str | None:
    """The dtype TRL loads the weights in (model_init_kwargs.dtype, else the config's own `dtype`, which the
    recipe scripts put there (TRL's ModelConfig for grpo, rloo and online-dpo, AsyncGRPOConfig's for
    async-grpo), float32 by default; "auto": the model's own), or None for one not in TRAINED_BYTES."""
    kwargs = config.get("model_init_kwargs")
    dtype = kwargs.get("dtype", kwargs.get("torch_dtype")) if isinstance(kwargs, Mapping) else None
    dtype = dtype if dtype is not None else config.get("dtype")
    if dtype is None:
        return "float32"
    if dtype == "auto":
        own = (model_config or {}).get("dtype") or (model_config or {}).get("torch_dtype") or "float32"
        dtype = own
    return dtype if dtype in TRAINED_BYTES else None


def mixed_precision(config: Mapping[str, Any]) -> bool:
    """Whether training computes in bf16 or fp16 (autocast), by TRL's rule: bf16 unless the config sets it
    false or sets fp16. train's policy sets them for its GPUs; plan and doctor see a recipe's config, which
    usually sets neither: on."""
    return bool(config.get("fp16")) or config.get("bf16") is None or bool(config.get("bf16"))


def has_reference_model(recipe: str, config: Mapping[str, Any]) -> bool:
    if recipe not in DEFAULT_BETA:
        return True
    beta = config.get("beta", DEFAULT_BETA[recipe])
    return not (isinstance(beta, int | float) and beta == 0)


@dataclass(frozen=True)
class Estimate:
    """The counted memory of one training run: `parameters` costing `trained` bytes each, plus `reference`
    bytes each for a frozen reference model (the model states, which FSDP2 shards); DDP adds `buckets` and
    `autocast` bytes each; FSDP2 adds `gathered` bytes, its units held whole at `compute` bytes a value."""

    parameters: int
    dtype: str
    trained: int
    reference: int
    buckets: int
    autocast: int
    gathered: int
    compute: int

    @property
    def states(self) -> int:
        """The model states: what FSDP2 shards over its processes."""
        return self.parameters * (self.trained + self.reference)

    @property
    def ddp_added(self) -> int:
        """The bytes per parameter DDP holds beside the states."""
        return self.buckets + self.autocast

    @property
    def total(self) -> int:
        """All of it, as one DDP process holds it."""
        return self.states + self.parameters * self.ddp_added

    def per_process(self, sharded: bool, processes: int) -> int:
        """What one process holds: all of it under DDP; under FSDP2 its 1/processes share of the states and
        the units it holds gathered."""
        return math.ceil(self.states / processes) + self.gathered if sharded else self.total

    def processes_needed(self, budget: int) -> int | None:
        """The fewest FSDP2 processes whose shares fit in `budget` bytes each (None: no count would, the
        gathered units alone filling it)."""
        left = budget - self.gathered
        return math.ceil(self.states / left) if left > 0 else None

    def describe(self) -> str:
        ref = f" + {self.reference} for the reference model" if self.reference else ""
        copy = f" + {self.autocast} for autocast's copy of the weights" if self.autocast else ""
        return (
            f"{self.parameters / 1e9:.2f}B parameters x {self.trained} bytes ({self.dtype} weights, "
            f"gradients, AdamW's two moments){ref} = {gib(self.states)}; DDP adds {self.buckets} bytes each "
            f"for its gradient buckets{copy}; FSDP2 adds {gib(self.gathered)} held gathered (the root unit "
            f"and {GATHERED_LAYERS} layers, weights and gradients at {self.compute} bytes)"
        )


def estimate(
    model_config: Mapping[str, Any], recipe: str, config: Mapping[str, Any]
) -> tuple[Estimate | None, str]:
    """The counted memory for training the model of `model_config` with the recipe's `config`, or (None, why
    there is none)."""
    if config.get("use_peft"):
        return None, "use_peft trains an adapter, which is not estimated"
    counted, why = count(model_config)
    if counted is None:
        return None, why
    dtype = weights_dtype(config, model_config)
    if dtype is None:
        return None, f"model_init_kwargs.dtype is not one of {', '.join(TRAINED_BYTES)}"
    weight = WEIGHT_BYTES[dtype]
    reference = weight if has_reference_model(recipe, config) else 0
    mixed = mixed_precision(config)
    # DDP's buckets: a second copy of the gradients, in the weights' dtype, which it all-reduces.
    buckets = weight
    # autocast caches a bf16/fp16 copy of every float32 weight in the forward and keeps it for the backward.
    autocast = MIXED_BYTES if mixed and weight > MIXED_BYTES else 0
    # FSDP2 gathers in the compute dtype (accelerate's MixedPrecisionPolicy: bf16/fp16 with mixed precision).
    compute = MIXED_BYTES if mixed else weight
    # FSDP2: the root and the layers held whole, and each one's whole gradient until its reduce-scatter.
    gathered = (counted.root + GATHERED_LAYERS * counted.layer) * compute * 2
    trained = TRAINED_BYTES[dtype]
    found = Estimate(counted.total, dtype, trained, reference, buckets, autocast, gathered, compute)
    return found, counted.how


def vllm_share(mode: str, config: Mapping[str, Any], recipe: str, shared_server: float | None) -> float:
    """The share of each training GPU a vLLM on it takes: colocated, the config's vllm_gpu_memory_utilization
    (or TRL's default); a server sharing the GPUs, `shared_server`; otherwise none."""
    if mode == "colocate":
        value = config.get("vllm_gpu_memory_utilization")
        return float(value) if isinstance(value, int | float) else DEFAULT_COLOCATE_SHARE.get(recipe, 0.3)
    return shared_server or 0.0


def gib(size: float) -> str:
    return f"{size / GIB:.1f} GiB"
