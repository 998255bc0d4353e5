"""Why the GPU tests cannot run here, asked without importing torch into the test collector."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess


def cuda_devices() -> int:
    """GPUs the driver shows."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def missing(modules=("torch", "vllm", "trl"), scripts=("serve-vllm", "train")) -> str | None:
    """Why the GPU stack cannot run here, or None."""
    if cuda_devices() == 0:
        return "no CUDA GPU (nvidia-smi shows none)"
    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    absent += [name for name in scripts if shutil.which(name) is None]
    return f"gpu extra not installed: {', '.join(absent)} missing" if absent else None
