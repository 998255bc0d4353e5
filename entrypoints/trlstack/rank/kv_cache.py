"""A fixed KV cache for the vLLM engine that TRL starts inside each training rank (train --vllm-kv-cache-gib,
colocate).

vLLM otherwise sizes the KV cache from the memory it finds free after profiling a forward pass at start-up,
and aborts ("Error in memory profiling") when another process on the GPU freed memory meanwhile: with several
ranks on one GPU (train --ranks-per-gpu), the other ranks' engines and trainers do just that. Given
kv_cache_memory_bytes, vLLM takes that size and skips the check.

TRL 1.16 builds the engine with `LLM(...)` and has no setting that reaches kv_cache_memory_bytes: GRPO and
RLOO in trl.generation.vllm_generation, Online DPO in trl.experimental.online_dpo.online_dpo_trainer. The
name `LLM` in the recipe's module is replaced here by a subclass of vLLM's that adds the size to its
arguments; the rest of TRL's call is unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from trlstack.defaults import Env
from trlstack.option_types import handed_number
from trlstack.plan.memory import GIB
from trlstack.recipes import RECIPES

# The module whose `LLM` each recipe's script builds its engine with: Online DPO's trainer its own, every
# other recipe through VLLMGeneration.
BUILDERS = {RECIPES["online-dpo"].module: "trl.experimental.online_dpo.online_dpo_trainer"}
GENERATION = "trl.generation.vllm_generation"


def size_from(environ: Mapping[str, str]) -> int | None:
    """The size train gives every rank, in bytes (None: vLLM sizes it); SystemExit naming the variable for a
    bad value."""
    gib = handed_number(environ, Env.VLLM_KV_CACHE_GIB, "a size in GiB", "--vllm-kv-cache-gib")
    if gib is None:
        return None
    return int(gib * GIB)


def with_size(kwargs: Mapping[str, Any], size: int) -> dict[str, Any]:
    """LLM's keyword arguments with the KV cache fixed at `size` bytes (one TRL passed would win; it passes
    none)."""
    return {"kv_cache_memory_bytes": size, **kwargs}


def fixed(llm: type, size: int) -> type:
    """vLLM's LLM class, building its engine with a KV cache of `size` bytes."""

    class FixedKVCacheLLM(llm):  # type: ignore[misc]  # vLLM is untyped here
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **with_size(kwargs, size))

    return FixedKVCacheLLM


def install(say: Callable[[str], None], script: str, environ: Mapping[str, str]) -> type | None:
    """Fix the KV cache of the engine this rank's recipe builds, where train asks for it (imports TRL's
    module that builds it, and vLLM); the class now in its place, or None."""
    size = size_from(environ)
    if size is None:
        return None
    module = importlib.import_module(BUILDERS.get(script, GENERATION))
    replaced = fixed(module.LLM, size)
    setattr(module, "LLM", replaced)  # noqa: B010 - the name TRL's module calls
    say(
        f"the vLLM engine in each rank holds a fixed {size / GIB:g} GiB KV cache ({Env.VLLM_KV_CACHE_GIB}); "
        "vLLM skips sizing it from its start-up memory profile"
    )
    return replaced
