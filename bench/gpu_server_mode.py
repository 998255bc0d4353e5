"""Server mode against colocate, side by side in one run: the weight push (seconds and GB/s per step), the
GRPO step, and a trainer's (re)start to its first finished step against a server that stays up.

The main job without the engine: `serve-vllm` and a GRPO trainer (bench/gpu_grpo_breakdown.py's `grpo-server`
case: the same step, phases and first-step clock as its colocated `grpo` case) as two processes. Layouts:

- `shared-gpu` (one GPU): both on GPU 0, each with its own NCCL host id (`--share-gpus`), so NCCL moves the
  weights over its socket transport on the one GPU, not P2P; the two processes time-slice the GPU.
- `two-gpu`: the server on GPU 0, the trainer on GPU 1 (P2P/NVLink where the pair has it).

For each shape the server starts once; the trainer runs against it twice: the first start (the server's
engine already warm) and a restart. Colocate runs the same step on one GPU twice, its compile cache cold, then
warm. Random-weight Qwen2.5-shaped models, bf16 weights, completions forced to --completion-tokens.

    python bench/gpu_server_mode.py --layout shared-gpu --out bench/results/gpu_server_mode.json

With --ipc, on one GPU: the weight push through CUDA IPC against NCCL sockets, and what it does to the step,
side by side at each shape (default 0.5B, 1.5B and the largest shape whose trainer fits beside vLLM's share,
by trlstack's memory estimate, which the report says). For each shape: a server with trlstack's IPC engine
(`serve-vllm --share-gpus`, fixed 2 GiB KV cache), pushed to --pushes times from a process holding the bf16
weights (bench/gpu_push.py: packed and unpacked, loaded in place, and packed through vLLM's layerwise
reload), then, at the --step-shapes (all by default), the GRPO step
over IPC (the `grpo-server` case, its ranks' push replaced as train's are); a server with the NCCL engine
(`--weight-transfer nccl`, eager), pushed to the same way through TRL's client; at the step shapes the
colocated step. At the first step shape also async-grpo against grpo over IPC (bench/gpu_async_grpo.py's
runs, both with bf16 weights). Servers that only take pushes run eager. Writes JSON and a plot beside it.

    python bench/gpu_server_mode.py --ipc --out bench/results/gpu_ipc.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_grpo_breakdown import SHAPES, run_child, versions  # noqa: E402
from server_cases import LAYOUTS, VARIANT, start_server, stop, summary, weights_bytes  # noqa: E402
from trlstack.gpus import nccl_host_id  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=LAYOUTS, default="shared-gpu")
    parser.add_argument("--shapes", nargs="*", help="default 0.5B 1.5B (--ipc: and the largest that fits)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_server_mode.json"))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--case-timeout", type=int, default=400)
    parser.add_argument("--colocate-shapes", nargs="*", default=["0.5B"], help="shapes colocate also runs")
    parser.add_argument(
        "--measure-after",
        type=Path,
        help="start the first server now, but run no trainer before this file exists (other GPU work can end "
        "while the engine compiles; that server's start time is then not comparable)",
    )
    parser.add_argument(
        "--kv-cache-bytes",
        type=int,
        help="the server's KV cache, fixed (vLLM's --kv-cache-memory-bytes): its start skips vLLM's memory "
        "profiling, which aborts when other processes free GPU memory meanwhile (with --measure-after)",
    )
    parser.add_argument(
        "--restart-shapes", nargs="*", help="shapes whose trainer also restarts against the warm server (all)"
    )
    parser.add_argument(
        "--colocate-runs", type=int, default=2, help="colocate runs per shape: compile cache cold, then warm"
    )
    parser.add_argument("--ipc", action="store_true", help="CUDA IPC against NCCL sockets on one GPU (above)")
    parser.add_argument("--pushes", type=int, default=5, help="--ipc: timed pushes per transport")
    parser.add_argument(
        "--async-steps", type=int, default=10, help="--ipc: steps of async-grpo and grpo (0: none)"
    )
    parser.add_argument(
        "--step-shapes",
        nargs="*",
        help="--ipc: shapes whose GRPO step is also measured, server and colocate (all)",
    )
    args = parser.parse_args()
    if args.ipc:
        import gpu_ipc

        return gpu_ipc.study(args, sys.argv[1:])
    args.shapes = args.shapes or ["0.5B", "1.5B"]
    keys = ("steps", "skip", "batch", "generations", "completion_tokens", "prompt_words")
    args.passthrough = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in keys]
    _, train_gpu, shared = LAYOUTS[args.layout]

    work = Path(tempfile.mkdtemp(prefix="server-mode-"))
    report: dict = {
        "benchmark": "server mode vs colocate: weight push, GRPO step, trainer (re)start to its first step",
        "layout": args.layout,
        "transport": "NCCL sockets on one GPU (two NCCL host ids), not P2P between two GPUs"
        if shared
        else "NCCL between two GPUs",
        "variant": VARIANT,
        **{k: getattr(args, k) for k in keys},
        "versions": versions(),
        "shapes": {},
    }

    def write() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")

    for shape in args.shapes:
        model_dir = work / shape
        made = [sys.executable, str(Path(__file__).with_name("gpu_grpo_breakdown.py")), "--make-model", shape,
                str(model_dir), str(work / f"tokenizer-{SHAPES[shape]['vocab_size']}")]  # fmt: skip
        subprocess.run(made, check=True)
        pushed = weights_bytes(model_dir)
        row: dict = {"weights_bytes": pushed}
        report["shapes"][shape] = row
        # Only the first shape's server runs with CUDA graphs; the others measure the push, not generation.
        eager = shape != args.shapes[0]
        server, url, row["server_start_s"] = start_server(
            model_dir,
            args.layout,
            work / "server-cache",
            work / f"server-{shape}.log",
            eager,
            args.kv_cache_bytes,
        )
        row["server_enforce_eager"] = eager
        row["server_kv_cache_bytes"] = args.kv_cache_bytes or "profiled by vLLM"
        if args.measure_after is not None and shape == args.shapes[0]:
            row["server_start_note"] = "started while other GPU work ran (--measure-after)"
            while not args.measure_after.exists():
                time.sleep(1)
        os.environ.update(BENCH_SERVER_URL=url, CUDA_VISIBLE_DEVICES=train_gpu, VLLM_HOST_IP="127.0.0.1")
        if shared:
            os.environ.update(nccl_host_id("train"))
        args.compile_cache = work / "trainer-cache"
        try:
            restarts = args.restart_shapes is None or shape in args.restart_shapes
            for run in ("first", "restart")[: 2 if restarts else 1]:
                case = run_child(("grpo-server", shape, VARIANT), str(model_dir), args)
                row[f"server_{run}"] = summary(case, pushed)
                print(f"{shape} server {run}: {row[f'server_{run}']}", flush=True)
                write()
        finally:
            stop(server)
        os.environ.pop("NCCL_HOSTID", None)
        if shape in args.colocate_shapes:
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            args.compile_cache = Path(tempfile.mkdtemp(prefix="colocate-cache-", dir=work))  # empty: cold
            for run in ("cold", "warm")[: args.colocate_runs]:
                case = run_child(("grpo", shape, VARIANT), str(model_dir), args)
                row[f"colocate_{run}"] = summary(case, pushed)
                print(f"{shape} colocate {run}: {row[f'colocate_{run}']}", flush=True)
                write()
            server_step = row.get("server_restart", row["server_first"]).get("step_s")
            colocate_step = row["colocate_warm" if args.colocate_runs > 1 else "colocate_cold"].get("step_s")
            if server_step and colocate_step:
                row["server_vs_colocate_step_ratio"] = server_step / colocate_step
        write()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
