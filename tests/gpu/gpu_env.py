"""Why the GPU tests cannot run here, asked without importing torch into the test collector."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model: Path, port: int, log: Path, gpus: str | None = None) -> subprocess.Popen:
    """serve-vllm on `model` in its own process group (so stop() ends its workers too), logging to `log`."""
    env = dict(os.environ)  # as the image runs it: vLLM's own sampler choice (FlashInfer is shipped)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    argv = ["serve-vllm", "--model", str(model), "--port", str(port), "--gpu-memory-utilization", "0.3"]
    sink = log.open("w")
    return subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    """Return once `url`/health answers 200; fail with the server's log if it exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"serve-vllm exited ({process.returncode}):\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no 200 from /health in {timeout} s:\n{log.read_text()[-4000:]}"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=120)
