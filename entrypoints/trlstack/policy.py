"""Speed decisions for the trainer's GPUs: mixed precision and the attention implementation.

Pure functions over GPU facts; what is installed or cached is asked through a function passed in, so the
decision table can be tested (and reordered from benchmark results) without the GPU stack.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from trlstack.caches import cached_kernel_versions
from trlstack.defaults import BF16_CAPABILITY, Env, is_true
from trlstack.gpus import Gpu


def precision(gpus: Sequence[Gpu], cpu: bool = False) -> tuple[str, str]:
    """("bf16" | "fp16" | "fp32", why) for training on `gpus`, or on the CPU; `doctor` says the same.

    The evidence is each GPU's compute capability (NVML's; a MIG device has its GPU's). Without it for every
    GPU (a preview for another machine, or a driver that did not say), the choice is the one every GPU CUDA 13
    supports can run, as for attention (sdpa): a guess of bf16 would stop a Turing GPU at start.
    """
    if cpu:
        return "fp32", "CPU run"
    known = [gpu.compute_capability for gpu in gpus if gpu.compute_capability is not None]
    threshold = "{}.{}".format(*BF16_CAPABILITY)
    if not known or len(known) < len(gpus):
        return "fp16", (
            "compute capability unknown: fp16, which every GPU CUDA 13 supports has "
            f"(bf16 needs {threshold}; set bf16: true in the config for Ampere or newer)"
        )
    lowest = min(known)
    shown = "{}.{}".format(*lowest)
    if lowest >= BF16_CAPABILITY:
        return "bf16", f"compute capability {shown} >= {threshold}"
    return "fp16", f"compute capability {shown} < {threshold} has no bf16"


@dataclass(frozen=True)
class Attention:
    """One attention implementation and the GPUs it runs on (compute capability bounds, inclusive)."""

    implementation: str  # transformers' attn_implementation: a Kernels Hub repo or a built-in name
    min_capability: tuple[int, int] = (0, 0)
    max_capability: tuple[int, int] = (99, 99)

    @property
    def from_hub(self) -> bool:
        return "/" in self.implementation


# Fastest first; the first one that fits every training GPU and is available wins. `sdpa` (PyTorch's fused
# attention) always is. Hub kernels need no compilation; FlashAttention-3 (the full build, with the backward
# pass training needs) is built for Hopper only.
ATTENTION_PREFERENCE: tuple[Attention, ...] = (
    Attention("kernels-community/flash-attn3", min_capability=(9, 0), max_capability=(9, 0)),
    Attention("kernels-community/flash-attn2", min_capability=(8, 0)),
    Attention("sdpa"),
)


def choose_attention(
    gpus: Sequence[Gpu],
    unavailable: Callable[[str], str | None],
    preference: Sequence[Attention] = ATTENTION_PREFERENCE,
) -> tuple[str, list[str]]:
    """The attention implementation for `gpus`, and a note for each faster one passed over and why.

    `unavailable(implementation)` returns why a Hub kernel cannot be used here, or None when it can.
    """
    notes: list[str] = []
    capabilities = [gpu.compute_capability for gpu in gpus if gpu.compute_capability is not None]
    for choice in preference:
        if not choice.from_hub:
            return choice.implementation, notes
        if not capabilities or len(capabilities) < len(gpus):
            notes.append(f"{choice.implementation} skipped: compute capability unknown")
            continue
        if not all(choice.min_capability <= cap <= choice.max_capability for cap in capabilities):
            continue  # not built for these GPUs; nothing to report
        reason = unavailable(choice.implementation)
        if reason is None:
            return choice.implementation, notes
        notes.append(f"{choice.implementation} skipped: {reason}")
    return "sdpa", notes


# The major version of each Kernels Hub repo that transformers 5.17 loads for an attn_implementation
# (its _FLASH_ATTN_KERNEL_VERSION_MAPPING: flash-attn2 -> v3, any other kernel -> v1). Offline, the cache
# must hold that version's ref, or loading the model fails.
HUB_KERNEL_VERSION = {"kernels-community/flash-attn2": 3}
DEFAULT_HUB_KERNEL_VERSION = 1


def kernels_mismatch(
    transformers_version: str | None, transformers_requires: Iterable[str], kernels_version: str | None
) -> str | None:
    """Why transformers would refuse Hub kernels with the installed `kernels`, or None when it accepts them.

    transformers checks the `kernels` version against a range it declares (`is_kernels_available`) and raises
    at model load when it is outside; the same range is its `kernels` requirement, read here from its package
    metadata because importing transformers imports torch. An image test checks both agree.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    if kernels_version is None:
        return "the `kernels` package is not installed"
    if transformers_version is None:
        return "transformers is not installed"
    for line in transformers_requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != "kernels":
            continue
        if requirement.specifier.contains(kernels_version, prereleases=True):
            return None
        return (
            f"kernels {kernels_version} is installed, but transformers {transformers_version} loads Hub "
            f"kernels only with kernels{requirement.specifier}"
        )
    return f"transformers {transformers_version} declares no `kernels` version it loads Hub kernels with"


def installed_kernels_problem() -> str | None:
    """kernels_mismatch for this environment's transformers and kernels (package metadata only)."""
    from importlib import metadata

    from trlstack.stack import installed_version

    transformers_version = installed_version("transformers")
    requires = (metadata.requires("transformers") or []) if transformers_version else []
    return kernels_mismatch(transformers_version, requires, installed_version("kernels"))


# How long the trust question may take before the Hub counts as unreachable: kernels itself waits for no
# answer at model load, where a hang or an error would end the run.
HUB_ANSWER_S = 10.0


def publisher_problem(repo_id: str, timeout: float = HUB_ANSWER_S) -> str | None:
    """Why kernels would refuse `repo_id` online, or None: before every load that is not offline, kernels 0.16
    asks the Hub whether the repo's organization is a trusted kernel publisher, and raises when the Hub does
    not answer or says no (transformers then fails at model load, cached kernel or not)."""
    import threading

    from huggingface_hub import HfApi

    publisher = repo_id.split("/", 1)[0]
    answer: list[object] = []

    def ask() -> None:
        try:
            answer.append(HfApi().get_organization_overview(publisher))
        except Exception as error:  # what kernels sees too: any failure means "could not verify"
            answer.append(error)

    asking = threading.Thread(target=ask, daemon=True)  # a hung connection must not hold the exit
    asking.start()
    asking.join(timeout)
    if not answer:
        return f"the Hub did not answer within {timeout:g} s, so kernels cannot verify its publisher"
    (info,) = answer
    if isinstance(info, Exception):
        return f"the Hub cannot be reached to verify its publisher ({type(info).__name__})"
    if not getattr(info, "trustedKernelPublisher", False):
        return f"{publisher} is not a trusted kernel publisher on the Hub, so kernels refuses it"
    return None


def hub_kernel_unavailable(
    repo_id: str,
    environ: Mapping[str, str] | None = None,
    publisher: Callable[[str], str | None] = publisher_problem,
) -> str | None:
    """Why the Kernels Hub kernel `repo_id` cannot be loaded here, or None (cached offline, or trusted and
    reachable online). `publisher(repo_id)` asks the Hub what kernels asks it before loading (online only)."""
    environ = os.environ if environ is None else environ
    problem = installed_kernels_problem()
    if problem is not None:
        return problem
    version = HUB_KERNEL_VERSION.get(repo_id, DEFAULT_HUB_KERNEL_VERSION)
    versions = cached_kernel_versions(repo_id, environ)
    cached = versions is not None and version in versions
    if is_true(environ.get(Env.HF_HUB_OFFLINE)):
        if cached:
            return None  # kernels skips the trust question offline
        if versions is None:
            return f"not in the kernel cache and {Env.HF_HUB_OFFLINE} is set"
        return (
            f"the kernel cache lacks v{version} (the version transformers loads) and {Env.HF_HUB_OFFLINE} "
            "is set"
        )
    problem = publisher(repo_id)
    if problem is not None and cached:
        return f"{problem} (it is cached: {Env.HF_HUB_OFFLINE}=1 loads it without asking)"
    return problem
