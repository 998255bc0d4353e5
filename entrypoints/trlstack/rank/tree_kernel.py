"""Which attention kernel serves async-grpo's tree packing, and the two that stand in for the Hub's.

TRL's AsyncGRPOTrainer always trains with tree packing (a prefix trie of each rank's samples, attention
routed along each sample's own path: trl/experimental/async_grpo/packing.py). Its attention calls one varlen
kernel, which packing.py loads from the Hub, `kernels-community/flash-attn3`, through `kernels.get_kernel`: a
machine that has not cached it and cannot reach the Hub fails at the first forward. Here the kernel is chosen
before the model loads, and the log says which one serves:

- `hub`: TRL's own, where it loads (cached, or the Hub reachable); the image bakes it where the build could;
- `fa4`: FlashAttention-4's varlen interface (the `flash-attn-4` package, Hopper and newer), through an
  adapter: FA4 takes its options by keyword and writes an unlimited window as None where FA3 writes -1.
  The lock pins flash-attn-4 4.0.0b19, the release whose pins match vLLM 0.25's cutlass-dsl and tvm-ffi. A
  young kernel compiled at its first call: where that call fails (a head size or dtype it does not take),
  SDPA serves from then on, and the log says so;
- `sdpa`: PyTorch's scaled_dot_product_attention, one call per trie segment: correct on any device, slower.

`auto` (the default) takes the first of these that loads. This module imports torch only when a kernel is
used, so its decisions are tested without it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

KERNELS = ("auto", "hub", "fa4", "sdpa")
HUB_REPO = "kernels-community/flash-attn3"  # what TRL 1.16's packing.py loads, at version 1
FA4_MODULE = "flash_attn.cute"
FA4_MIN_CAPABILITY = (9, 0)  # FlashAttention-4 is written for Hopper (sm90) and Blackwell (sm100)
SPEEDS = {
    "hub": "FlashAttention-3 from the Hub, TRL's own choice",
    "fa4": "FlashAttention-4 (flash-attn-4) through trlstack's adapter",
    "sdpa": "PyTorch SDPA, one call per trie segment: correct, slower than a varlen kernel",
}


def choose_kernel(requested: str, problems: Mapping[str, Callable[[], str | None]]) -> tuple[str, list[str]]:
    """The kernel that serves (`requested`, or with `auto` the first of hub, fa4 that has no problem, else
    sdpa) and why each one passed over was; ValueError naming the problem when the one requested cannot.

    `problems[name]()` says why that kernel cannot serve here, or None when it can."""
    if requested not in KERNELS:
        raise ValueError(f"tree_attention_kernel must be one of {', '.join(KERNELS)}, not {requested!r}.")
    if requested == "sdpa":
        return "sdpa", []
    if requested != "auto":
        problem = problems[requested]()
        if problem:
            raise ValueError(
                f"tree_attention_kernel {requested} cannot serve: {problem}. Set tree_attention_kernel: auto "
                "to take the first that can (sdpa serves everywhere)."
            )
        return requested, []
    skipped: list[str] = []
    for name in ("hub", "fa4"):
        problem = problems[name]()
        if problem is None:
            return name, skipped
        skipped.append(f"{name} passed over: {problem}")
    return "sdpa", skipped


def fa4_problem(
    capability: tuple[int, int] | None, find: Callable[[str], Any] = importlib.util.find_spec
) -> str | None:
    """Why FlashAttention-4 cannot serve on a GPU of `capability` (None: no GPU), or None."""
    if capability is None:
        return "no CUDA GPU"
    if capability < FA4_MIN_CAPABILITY:
        return "compute capability {}.{} is below Hopper's 9.0".format(*capability)
    try:
        found = find(FA4_MODULE)
    except ModuleNotFoundError:
        found = None
    if found is None:
        return "the flash-attn-4 package is not installed (the gpu extra has it)"
    return None


def fa4_window(window_size: tuple[int, int]) -> tuple[int | None, int | None]:
    """FA3's window (-1: unlimited) as FA4 writes it (None: unlimited)."""
    left, right = window_size
    return (None if left < 0 else left, None if right < 0 else right)


class FA4:
    """FlashAttention-4's varlen function behind FA3's call, as packing.tree_attention makes it."""

    @staticmethod
    def flash_attn_varlen_func(
        q: Any,
        k: Any,
        v: Any,
        cu_seqlens_q: Any,
        cu_seqlens_k: Any,
        max_seqlen_q: int,
        max_seqlen_k: int,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
    ) -> Any:
        varlen = importlib.import_module(FA4_MODULE).flash_attn_varlen_func
        return varlen(
            q,
            k,
            v,
            cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k,
            max_seqlen_q=int(max_seqlen_q),
            max_seqlen_k=int(max_seqlen_k),
            softmax_scale=softmax_scale,
            causal=causal,
            window_size=fa4_window(window_size),
            softcap=softcap,
        )


def visible_keys(query_len: int, key_len: int, window_left: int) -> list[tuple[int, int]]:
    """For each query of a segment, the keys it attends to, [first, last]: causal aligned to the end of the
    keys (a segment's queries are the last of its path, as in FlashAttention), within a left window (-1:
    none)."""
    spans = []
    for at in range(query_len):
        last = key_len - query_len + at
        first = 0 if window_left < 0 else max(0, last - window_left)
        spans.append((first, last))
    return spans


class SDPA:
    """The varlen call computed with PyTorch's SDPA, one segment at a time (layout: tokens, heads, dim)."""

    @staticmethod
    def flash_attn_varlen_func(
        q: Any,
        k: Any,
        v: Any,
        cu_seqlens_q: Any,
        cu_seqlens_k: Any,
        max_seqlen_q: int,
        max_seqlen_k: int,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
    ) -> Any:
        import torch

        if softcap:
            raise ValueError(
                "tree_attention_kernel sdpa has no logit softcap; use hub or fa4 for this model."
            )
        out = torch.empty_like(q)
        starts_q, starts_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        groups = (
            q.shape[1] // k.shape[1]
        )  # grouped-query attention: each key head serves `groups` query heads
        for segment in range(len(starts_q) - 1):
            q0, q1, k0, k1 = (
                starts_q[segment],
                starts_q[segment + 1],
                starts_k[segment],
                starts_k[segment + 1],
            )
            if q1 == q0:
                continue
            query = q[q0:q1].transpose(0, 1)
            key = k[k0:k1].transpose(0, 1).repeat_interleave(groups, dim=0)
            value = v[k0:k1].transpose(0, 1).repeat_interleave(groups, dim=0)
            mask = None
            if causal:
                mask = torch.zeros(q1 - q0, k1 - k0, dtype=torch.bool, device=q.device)
                for row, (first, last) in enumerate(visible_keys(q1 - q0, k1 - k0, window_size[0])):
                    mask[row, first : last + 1] = True
            attended = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=mask, scale=softmax_scale
            )
            out[q0:q1] = attended.transpose(0, 1)
        return out


class FirstFailureToSDPA:
    """`kernel`, until a call of it fails: that call and every later one go to SDPA, said once."""

    def __init__(self, kernel: Any, name: str, say: Callable[[str], None]) -> None:
        self.kernel, self.name, self.say, self.failed = kernel, name, say, False

    def flash_attn_varlen_func(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            try:
                return self.kernel.flash_attn_varlen_func(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - any failure: said, then SDPA serves
                self.failed = True
                self.say(
                    f"tree attention kernel: sdpa from now on ({SPEEDS['sdpa']}); {self.name} failed "
                    f"({type(error).__name__}: {str(error)[:300]})"
                )
        return SDPA.flash_attn_varlen_func(*args, **kwargs)


def hub_kernel() -> Any:
    """TRL's own kernel (downloads it where the Hub can be reached and it is not cached)."""
    from kernels import get_kernel

    return get_kernel(HUB_REPO, version=1)


def install(requested: str, say: Callable[[str], None]) -> str:
    """Choose the kernel for this process's GPU, make TRL's tree attention call it, and say which serves."""
    import torch
    from trl.experimental.async_grpo import packing

    if torch.version.hip:
        say("tree attention kernel: TRL's own for ROCm (kernels-community/aiter-flash-attn)")
        return "hub"
    capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    loaded: dict[str, Any] = {}

    def hub_problem() -> str | None:
        try:
            loaded["hub"] = hub_kernel()
        except Exception as error:  # noqa: BLE001 - any failure to load means it cannot serve; said below
            return f"{HUB_REPO} did not load ({type(error).__name__}: {error})"
        return None

    name, skipped = choose_kernel(requested, {"hub": hub_problem, "fa4": lambda: fa4_problem(capability)})
    for note in skipped:
        say(f"tree attention: {note}")
    kernel = loaded["hub"] if name == "hub" else FirstFailureToSDPA(FA4, name, say) if name == "fa4" else SDPA
    packing._flash_attn = lambda: kernel  # tree_attention looks the loader up by name at each call
    say(f"tree attention kernel: {name} ({SPEEDS[name]})")
    return name
