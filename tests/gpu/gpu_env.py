"""Why the GPU tests cannot run here, asked without importing torch into the test collector; serve-vllm
started, awaited and stopped the way every GPU test does it; the server layouts the server-mode tests run in;
and what shows that a run learned (its weights moved)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import probe
from trlstack.ports import free_port
from trlstack.roles.train.health import wait_for_health

__all__ = [
    "LAYOUTS",
    "Layout",
    "cuda_devices",
    "free_port",
    "max_weight_change",
    "missing",
    "reward_env",
    "start_server",
    "stop",
    "wait_healthy",
]

HERE = Path(__file__).resolve().parent
# Set (to a size in bytes) where other GPU work runs beside the tests on the same GPU: vLLM sizes its KV cache
# by profiling the free memory, and aborts ("Error in memory profiling") when another process frees memory
# meanwhile; a fixed KV cache skips that profiling, so servers of two test runs can start side by side.
FIXED_KV_CACHE = "TRLSTACK_GPU_TESTS_KV_CACHE_BYTES"
# The reward the tiny model earns in varying amounts (rewards.py): on it a run learns, on accuracy_reward not.
VARIED_REWARD = "rewards.varied_reward"


@dataclass(frozen=True)
class Layout:
    """Where the server and the trainer run: the GPU each sees, whether they share it (`--share-gpus`), and
    how the weights travel (`--weight-transfer`): the shared-GPU layout of the server-mode tests keeps NCCL,
    each role then a host of its own to NCCL, which pushes over sockets; test_ipc.py runs CUDA IPC, the
    default where the GPUs are shared."""

    name: str
    serve_gpus: str
    train_gpus: str
    share: bool
    needs_gpus: int
    transfer: str = "auto"

    @property
    def flags(self) -> list[str]:
        share = ["--share-gpus"] if self.share else []
        return share + (["--weight-transfer", self.transfer] if self.transfer != "auto" else [])

    def train_env(self, **more: str) -> dict[str, str]:
        # Each process sees only its own GPU here, so the UUID overlap check has nothing to compare.
        return {**reward_env(), "CUDA_VISIBLE_DEVICES": self.train_gpus, **more}


LAYOUTS = (
    Layout("shared-gpu", serve_gpus="0", train_gpus="0", share=True, needs_gpus=1, transfer="nccl"),
    Layout("two-gpu", serve_gpus="0", train_gpus="1", share=False, needs_gpus=2),
)


def reward_env() -> dict[str, str]:
    """The environment with this folder importable, so every training process finds rewards.py."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def max_weight_change(before: Path, after: Path) -> float:
    """The largest absolute change of any weight between two saved models (safetensors folders)."""
    from safetensors.torch import load_file

    def weights(folder: Path) -> dict:
        tensors: dict = {}
        for file in sorted(folder.glob("*.safetensors")):
            tensors.update(load_file(file))
        return tensors

    old, new = weights(before), weights(after)
    shared = old.keys() & new.keys()
    assert shared, f"no weights in common between {before} and {after}"
    return max((new[name].float() - old[name].float()).abs().max().item() for name in shared)


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


def start_server(
    model: Path, port: int, log: Path, gpus: str | None = None, flags: tuple[str, ...] | list[str] = ()
) -> subprocess.Popen:
    """serve-vllm on `model` in its own process group (so stop() ends its workers too), logging to `log`."""
    env = dict(os.environ)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    fixed_kv_cache = os.environ.get(FIXED_KV_CACHE)
    # With the KV cache fixed vLLM sizes nothing by the fraction; it only checks that much is free at start.
    fraction = "0.1" if fixed_kv_cache else "0.3"
    argv = ["serve-vllm", "--model", str(model), "--port", str(port), "--gpu-memory-utilization", fraction]
    argv += list(flags)
    if fixed_kv_cache:
        argv += ["--", "--kv-cache-memory-bytes", fixed_kv_cache]
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


def stop(process: subprocess.Popen, grace: float = 120) -> None:
    """SIGTERM to the server's process group; SIGKILL after `grace` seconds. A server left inside a weight
    push whose trainer is gone waits for it in NCCL and does not end on SIGTERM (seen on the H200: uvicorn
    waits for that request); compose's stop_grace_period ends such a server the same way."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
