"""serve-vllm start-up: seconds from launch to the first 200 from /health, on one CUDA GPU.

Each start serves the tiny model from `trlstack tiny` with the flags TRL's guide gives. "cold" starts get
empty vLLM, TorchInductor and Triton caches (a fresh machine or container); "warm" starts reuse the caches
the cold start filled (a restart). Starts run one after another in one invocation; the JSON keeps every
sample, the median per kind, and vLLM's own timing lines from each log.

    python bench/gpu_serve.py --out bench/results/gpu_serve.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trlstack.errors import UsageError
from trlstack.ports import free_port
from trlstack.roles.train.health import wait_for_health

# vLLM's log lines that say where start-up time goes.
TIMING = re.compile(
    r"(took|takes|finished in|Compil\w+ .* in|Loading weights) .*?\d+(\.\d+)? ?s", re.IGNORECASE
)


def one_start(model: Path, caches: Path, log: Path, timeout: float) -> dict:
    """Launch serve-vllm, wait for /health 200, stop it; return the seconds and vLLM's timing lines."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "VLLM_CACHE_ROOT": str(caches / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "VLLM_USE_FLASHINFER_SAMPLER": os.environ.get("VLLM_USE_FLASHINFER_SAMPLER", "0"),
    }
    argv = ["serve-vllm", "--model", str(model), "--port", str(port), "--gpu-memory-utilization", "0.3"]
    started = time.perf_counter()
    with log.open("w") as sink:
        process = subprocess.Popen(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        exited = lambda: None if process.poll() is None else f"exited {process.returncode}"  # noqa: E731
        wait_for_health(url, timeout, interval=0.2, stopped=exited)
        seconds = time.perf_counter() - started
    except UsageError as error:
        return {"status": "failed", "reason": f"{error}: {log.read_text()[-600:]}"}
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=120)
    lines = [line.strip()[-200:] for line in log.read_text().splitlines() if TIMING.search(line)]
    return {"status": "ok", "seconds_to_healthy": seconds, "vllm_timing_lines": lines}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_serve.json"))
    parser.add_argument("--cold", type=int, default=1, help="starts with empty caches")
    parser.add_argument("--warm", type=int, default=2, help="starts reusing the first cold start's caches")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    subprocess.run([sys.executable, "-m", "trlstack", "tiny", str(work / "tiny")], check=True)
    model = work / "tiny" / "model"
    runs = []
    for kind, count in (("cold", args.cold), ("warm", args.warm)):
        for index in range(count):
            caches = work / (f"cold-{index}" if kind == "cold" else "cold-0")
            result = one_start(model, caches, work / f"{kind}-{index}.log", args.timeout)
            runs.append({"kind": kind, **result})
            shown = f"{result['seconds_to_healthy']:.1f} s" if result["status"] == "ok" else result["reason"]
            print(f"{kind} start {index + 1}: {shown}", flush=True)
    medians = {
        kind: statistics.median(times)
        for kind in ("cold", "warm")
        if (times := [r["seconds_to_healthy"] for r in runs if r["kind"] == kind and r["status"] == "ok"])
    }
    report = {
        "benchmark": "serve-vllm launch to the first 200 from /health (tiny Qwen2-shaped model, TRL's flags)",
        "flags": "VLLM_SERVER_DEV_MODE=1 vllm serve --weight-transfer-config {backend: nccl} "
        "--logprobs-mode processed_logprobs --max-logprobs -1 --gpu-memory-utilization 0.3",
        "median_seconds": medians,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"medians: {medians}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
