"""Why the GPU tests cannot run here, asked without importing torch into the test collector, and serve-vllm
started, awaited and stopped the way every GPU test does it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import probe
from trlstack.health import wait_for_health
from trlstack.ports import free_port

__all__ = ["cuda_devices", "free_port", "missing", "start_server", "stop", "wait_healthy"]


def cuda_devices() -> int:
    """GPUs the driver shows (through NVML, as trlstack finds them)."""
    return len(probe().gpus)


def missing(modules=("torch", "vllm", "trl"), scripts=("serve-vllm", "train")) -> str | None:
    """Why the GPU stack cannot run here, or None."""
    if cuda_devices() == 0:
        return "no CUDA GPU (the driver shows none)"
    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    absent += [name for name in scripts if shutil.which(name) is None]
    return f"gpu extra not installed: {', '.join(absent)} missing" if absent else None


def start_server(model: Path, port: int, log: Path, gpus: str | None = None) -> subprocess.Popen:
    """serve-vllm on `model` in its own process group (so stop() ends its workers too), logging to `log`."""
    env = dict(os.environ)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    argv = ["serve-vllm", "--model", str(model), "--port", str(port), "--gpu-memory-utilization", "0.3"]
    sink = log.open("w")
    return subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)


def exited(process: subprocess.Popen) -> Callable[[], str | None]:
    """For wait_for_health: why `process` cannot come up any more (it exited), or None while it runs."""
    return lambda: None if process.poll() is None else f"serve-vllm exited ({process.returncode})"


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    """Return once `url`/health answers 200; fail with the server's log if it exits or the time runs out."""
    try:
        wait_for_health(url, timeout, interval=1.0, stopped=exited(process))
    except UsageError as error:
        pytest.fail(f"{error}\n{log.read_text()[-4000:]}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=120)
