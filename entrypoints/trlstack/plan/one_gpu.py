"""The one-GPU layout by measurement: on a machine of one GPU with no server asked for, colocate (vLLM
inside the trainer) or a server beside it on the shared GPU, whichever a GRPO step measured faster at the size
nearest the model's (bench/gpu_server_mode.py; README.md, "One GPU"). The plan and train both decide by
`one_gpu_colocate`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class OneGpuStep:
    """A GRPO step on one GPU at one model size, side by side (bench/gpu_server_mode.py: TRL's defaults, bf16
    weights, random-weight Qwen2.5 shapes): vLLM inside the trainer (colocate) against a server beside it on
    the shared GPU, weights pushed through CUDA IPC. None: not measured."""

    shape: str
    parameters: int
    colocate_s: float | None
    server_ipc_s: float | None
    where: str  # the GPU
    server_nccl_s: float | None = None  # the server over NCCL sockets, measured before CUDA IPC

    @property
    def server_faster(self) -> bool:
        return (
            self.colocate_s is not None
            and self.server_ipc_s is not None
            and self.server_ipc_s < self.colocate_s
        )


# The one-GPU layout per model size: the faster of the two at the measured size nearest the model's
# (README.md, "One GPU"). Until a size's shared-GPU server over CUDA IPC is measured, colocate, measured
# faster than that server over NCCL sockets (1.10 s against 1.58 s a step at 0.5B on one H200).
ONE_GPU_STEPS = (
    OneGpuStep("0.5B", 494_032_768, 1.10, None, "one H200", server_nccl_s=1.58),
    # bench/results/gpu_ipc.json: TRL's GRPO defaults, bf16 weights, 16 completions (8 a prompt) of 256 tokens
    OneGpuStep("1.5B", 1_543_714_304, 0.97, 1.06, "one H100"),
    OneGpuStep("3B", 3_085_938_688, None, None, "not measured"),
)
DEFAULT_PARAMETERS = ONE_GPU_STEPS[0].parameters  # the default model's size (Qwen2.5-0.5B-Instruct)


def nearest_step(parameters: int | None, steps: Sequence[OneGpuStep] = ONE_GPU_STEPS) -> OneGpuStep:
    """The measured size nearest `parameters` (by ratio; None: the default model's)."""
    count = parameters or DEFAULT_PARAMETERS
    return min(steps, key=lambda step: abs(math.log(count / step.parameters)))


def one_gpu_choice(parameters: int | None, steps: Sequence[OneGpuStep] = ONE_GPU_STEPS) -> tuple[bool, str]:
    """On one GPU with nothing asked: whether the plan runs a server beside the trainer (True) or colocate,
    and why, from the measured size nearest the model's."""
    step = nearest_step(parameters, steps)
    size = "the default model's size" if parameters is None else f"{parameters / 1e9:.2g}B parameters"
    if step.server_faster:
        return True, (
            f"measured faster at {step.shape} ({size}) than colocate: a GRPO step of "
            f"{step.server_ipc_s:.2f} s against {step.colocate_s:.2f} s ({step.where}; README.md, "
            '"One GPU"); --vllm-mode colocate in train runs vLLM inside the trainer instead'
        )
    if step.colocate_s is None:
        return False, (
            f"colocate until a server on one GPU is measured faster at {step.shape} ({size}; README.md, "
            '"One GPU"); --share-gpus chooses the server'
        )
    against = ""
    if step.server_ipc_s is not None:
        against = f" against {step.server_ipc_s:.2f} s for a shared-GPU server (CUDA IPC)"
    elif step.server_nccl_s is not None:
        against = f" against {step.server_nccl_s:.2f} s for a shared-GPU server over NCCL sockets"
    return False, (
        f"measured faster on one GPU at {step.shape} ({size}): a GRPO step of {step.colocate_s:.2f} s"
        f'{against} ({step.where}; README.md, "One GPU"); --share-gpus chooses the server'
    )


def one_gpu_colocate(gpus: int, server_asked: bool, parameters: int | None = None) -> tuple[bool, str]:
    """The one-GPU rule: on a machine of one GPU, where no split exists, with no server asked for, the layout
    measured faster for a model of `parameters` (one_gpu_choice): colocate, vLLM inside the trainer (True),
    or a server sharing the GPU (False); and why ("" where the rule does not apply). The plan and train
    both decide by it."""
    if gpus != 1 or server_asked:
        return False, ""
    server, why = one_gpu_choice(parameters)
    return not server, why
