"""What the server-mode benchmarks share (bench/gpu_server_mode.py, bench/gpu_ipc.py,
bench/gpu_async_grpo.py): a serve-vllm started for a case and stopped, the bytes a push moves, and a case's
row."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from trlstack.errors import UsageError
from trlstack.plan import SHARED_MEMORY_FRACTION, SPLIT_MEMORY_FRACTION
from trlstack.ports import free_port
from trlstack.roles.train.health import wait_for_health

LAYOUTS = {"shared-gpu": ("0", "0", True), "two-gpu": ("0", "1", False)}  # serve GPU, train GPU, shared
VARIANT = "trl"  # TRL's own GRPO defaults (the breakdown's variant of that name)


def start_server(
    model_dir: Path,
    layout: str,
    cache: Path,
    log: Path,
    eager: bool,
    kv_cache_bytes: int | None,
    transfer: str = "nccl",
) -> tuple:
    serve_gpu, _, shared = LAYOUTS[layout]
    port = free_port()
    fraction = SHARED_MEMORY_FRACTION if shared else SPLIT_MEMORY_FRACTION
    vllm = [*(["--enforce-eager"] if eager else []),
            *(["--kv-cache-memory-bytes", str(kv_cache_bytes)] if kv_cache_bytes else [])]  # fmt: skip
    argv = ["serve-vllm", "--model", str(model_dir), "--port", str(port), "--gpu-memory-utilization",
            str(fraction), *(["--share-gpus"] if shared else []),
            "--weight-transfer", transfer,
            *(["--", *vllm] if vllm else [])]  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": serve_gpu, "VLLM_CACHE_ROOT": str(cache)}
    started = time.perf_counter()
    server = subprocess.Popen(
        argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    exited = lambda: None if server.poll() is None else f"exited with {server.returncode}"  # noqa: E731
    try:
        wait_for_health(url, 900, interval=1.0, stopped=exited)
    except UsageError as error:
        os.killpg(server.pid, signal.SIGKILL)
        raise SystemExit(f"{error}; see {log}:\n{log.read_text()[-3000:]}") from None
    return server, url, time.perf_counter() - started


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)


def weights_bytes(model_dir: Path) -> int:
    """The bytes a push moves: the saved bf16 weights."""
    return sum(file.stat().st_size for file in model_dir.glob("*.safetensors"))


def summary(case: dict, pushed: int | None = None) -> dict:
    if case.get("status") != "ok":
        return {"status": case.get("status"), "reason": case.get("reason")}
    medians = case["median_s"]
    first = case["steps"][0]
    # (Re)start to the first finished step, in its parts: imports and data until the trainer is made, the
    # trainer made (model, and vLLM's engine or the NCCL group with the server), then step 1 by phase.
    row = {"step_s": medians["step"], "first_step_after_s": case["first_step_after_s"],
           "trainer_after_s": case.get("trainer_after_s"), "init_s": case["init_s"],
           "first_step_s": first["step"], "first_step_phases_s": first,
           "device_peak_mib": case.get("device_peak_mib")}  # fmt: skip
    if pushed and medians.get("weight sync"):
        row |= {"push_s": medians["weight sync"], "push_gb_per_s": pushed / medians["weight sync"] / 1e9}
    return row
