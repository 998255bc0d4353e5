"""Server mode on two GPUs: NCCL weight-sync time and bandwidth, GRPO seconds per step in server vs colocate
mode, and time to the first step, beside the GPU pair's P2P copy bandwidth measured in the same run.

The compose fast path without the engine: `serve-vllm` on GPU 0, the trainer on GPU 1. Model: Qwen2.5-0.5B's
shape with random weights (bench/gpu_grpo.py makes it); completions forced to a fixed length in both modes.

    python bench/gpu_server_mode.py --out bench/results/gpu_server_mode.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_grpo import SERVER_MODE, make_model, run_child
from trlstack.errors import UsageError
from trlstack.health import wait_for_health
from trlstack.ports import free_port

P2P = """
import json, statistics, torch
src = torch.empty(2**30, dtype=torch.uint8, device="cuda:0")
dst = torch.empty_like(src, device="cuda:1")
times = []
for _ in range(11):
    torch.cuda.synchronize(0); torch.cuda.synchronize(1)
    start = torch.cuda.Event(enable_timing=True); end = torch.cuda.Event(enable_timing=True)
    start.record(); dst.copy_(src); end.record(); end.synchronize()
    times.append(start.elapsed_time(end) / 1e3)
print(json.dumps({"p2p_access": torch.cuda.can_device_access_peer(0, 1),
                  "gb_per_s": src.numel() / statistics.median(times[1:]) / 1e9}))
"""

# The trainer's side of TRL's weight sync, on the trainer's GPU: the same client calls GRPO makes each step.
SYNC = """
import json, statistics, sys, time, torch
from transformers import AutoModelForCausalLM
from trl.generation.vllm_client import VLLMClient
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16).to("cuda:0")
client = VLLMClient(base_url=sys.argv[2])
client.init_communicator(device=0)
size = sum(p.numel() * p.element_size() for p in model.parameters())
times = []
for _ in range(int(sys.argv[3]) + 1):
    torch.cuda.synchronize(); start = time.perf_counter()
    client.update_model_params(model); client.reset_prefix_cache()
    torch.cuda.synchronize(); times.append(time.perf_counter() - start)
client.close_communicator()
median = statistics.median(times[1:])
print(json.dumps({"bytes": size, "seconds": times[1:], "median_s": median, "gb_per_s": size / median / 1e9}))
"""


def child_json(argv: list[str], env: dict[str, str], timeout: float) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        return {"status": "ok", **json.loads(lines[-1])}
    return {"status": "failed", "reason": done.stderr.strip()[-800:]}


def start_server(model_dir: Path, port: int, log: Path) -> tuple[subprocess.Popen, float]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    argv = ["serve-vllm", "--model", str(model_dir), "--port", str(port), "--gpu-memory-utilization", "0.5"]
    started = time.perf_counter()
    sink = log.open("w")
    server = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    exited = lambda: None if server.poll() is None else f"exited with {server.returncode}"  # noqa: E731
    try:
        wait_for_health(f"http://127.0.0.1:{port}", 600, interval=1.0, stopped=exited)
    except UsageError as error:
        raise SystemExit(f"{error}; see {log}") from None
    return server, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_server_mode.json"))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--syncs", type=int, default=5, help="timed weight syncs")
    args = parser.parse_args()

    import torch

    if torch.cuda.device_count() < 2:
        raise SystemExit("needs 2 CUDA GPUs: the server and the trainer each take one")
    shape = ["--steps", str(args.steps), "--skip", str(args.skip)]
    shape += ["--completion-tokens", str(args.completion_tokens)]
    report: dict = {"gpus": [torch.cuda.get_device_name(i) for i in range(2)], "steps": args.steps}
    report["p2p"] = child_json([sys.executable, "-c", P2P], {"CUDA_VISIBLE_DEVICES": "0,1"}, 300)

    with tempfile.TemporaryDirectory(prefix="server-mode-") as work:
        model_dir = Path(work) / "model"
        make_model(model_dir)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server, report["server_start_s"] = start_server(model_dir, port, Path(work) / "server.log")
        try:
            sync = [sys.executable, "-c", SYNC, str(model_dir), url, str(args.syncs)]
            report["weight_sync"] = child_json(sync, {"CUDA_VISIBLE_DEVICES": "1"}, 600)
            os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # the GRPO children train on GPU 1; GPU 0 serves
            grpo = argparse.Namespace(passthrough=[*shape, "--server-url", url], mode_timeout=900)
            report["grpo"] = {SERVER_MODE: run_child(SERVER_MODE, str(model_dir), grpo)}
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=120)
        grpo.passthrough = shape
        report["grpo"]["vllm-colocate"] = run_child("vllm-colocate", str(model_dir), grpo)

    for mode, case in report["grpo"].items():
        if case["status"] == "ok":
            case["time_to_first_step_s"] = case["init_s"] + case["step_s"][0]
            first = case["time_to_first_step_s"]
            print(f"{mode:>14}  {case['median_step_s']:.2f} s/step, first step after {first:.0f} s")
    modes = report["grpo"]
    if all(case["status"] == "ok" for case in modes.values()):
        report["server_vs_colocate_step_ratio"] = (
            modes[SERVER_MODE]["median_step_s"] / modes["vllm-colocate"]["median_step_s"]
        )
    if report["weight_sync"]["status"] == "ok" and report["p2p"]["status"] == "ok":
        report["weight_sync_share_of_p2p"] = report["weight_sync"]["gb_per_s"] / report["p2p"]["gb_per_s"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
