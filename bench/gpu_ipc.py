"""bench/gpu_server_mode.py --ipc (its docstring says what it measures and how): CUDA IPC against NCCL
sockets on one GPU, the push and the step, per shape; async-grpo against grpo over IPC."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import gpu_async_grpo
from children import run_case
from gpu_grpo_breakdown import SHAPES, run_child, versions
from server_cases import VARIANT, start_server, stop, summary, weights_bytes
from trlstack.gpus import nccl_host_id, probe
from trlstack.plan import SHARED_MEMORY_FRACTION
from trlstack.plan.memory import estimate, gib

HERE = Path(__file__).resolve().parent
KV_CACHE_BYTES = 2 << 30  # fixed, as the servers of a shared GPU run in the tests
HEADROOM = 0.8  # of the trainer's share: the rest for activations, the push buffer, the allocator's slack
PUSHES = ("ipc-packed", "ipc-unpacked", "ipc-packed-layerwise")  # the layerwise one last (gpu_push.py)


def largest_fitting(gpu_bytes: int) -> tuple[str, str]:
    """The largest shape whose trainer (GRPO, bf16 weights, AdamW; trlstack's estimate) fits beside vLLM's
    share of one GPU, and why it stops there."""
    budget = gpu_bytes * (1 - SHARED_MEMORY_FRACTION)
    fitting, counted = "0.5B", []
    for shape in ("0.5B", "1.5B", "3B", "7B"):
        found, _ = estimate(
            {"model_type": "qwen2", **SHAPES[shape]}, "grpo", {"model_init_kwargs": {"dtype": "bfloat16"}}
        )
        assert found is not None
        counted.append(f"{shape} {gib(found.total)}")
        if found.total <= budget * HEADROOM:
            fitting = shape
    why = (
        "the trainer's model states (trlstack's estimate: bf16 weights, gradients, AdamW; "
        f"{', '.join(counted)}) within {HEADROOM:g} of the {gib(budget)} the GPU's {gib(gpu_bytes)} "
        f"leaves beside vLLM's {SHARED_MEMORY_FRACTION:g}, the rest for activations and the push"
    )
    return fitting, why


def push_cases(url: str, model_dir: Path, transports: tuple[str, ...], args, env: dict) -> dict:
    """Each transport's pushes (bench/gpu_push.py, one process, the weights loaded once)."""
    argv = [sys.executable, str(HERE / "gpu_push.py"), "--url", url, "--model-dir", str(model_dir),
            "--transports", *transports, "--pushes", str(args.pushes)]  # fmt: skip
    result = run_case(argv, args.case_timeout, env)
    if result.pop("status") != "ok":
        return {transport: {"status": "failed", "reason": result.get("reason")} for transport in transports}
    for transport, row in result.items():
        print(f"push {transport}: {row['median_s']:.3f} s, {row['gb_per_s']:.1f} GB/s", flush=True)
    return result


def async_vs_grpo(args: argparse.Namespace, url: str, model_dir: Path, work: Path) -> dict:
    """samples/s of grpo and async-grpo through `train`, against the IPC server, both with bf16 weights."""
    settings = argparse.Namespace(
        layout="shared-gpu", steps=args.async_steps, skip=max(1, args.async_steps // 3), batch=args.batch,
        generations=args.generations, completion_tokens=args.completion_tokens,
        prompt_words=args.prompt_words, max_staleness=4, case_timeout=900, bf16_weights=True,
        weight_transfer="ipc",
    )  # fmt: skip
    data = gpu_async_grpo.make_dataset(work, args.prompt_words)
    rows: dict = {"weights_dtype": "bfloat16 in both (grpo --dtype bfloat16, async-grpo's own)"}
    for recipe in gpu_async_grpo.RECIPES:
        try:
            case = gpu_async_grpo.run(recipe, settings, url, model_dir, data, work)
            rows[recipe] = gpu_async_grpo.summary(case, settings)
        except SystemExit as error:  # a failed run ends only its own row
            rows[recipe] = {"error": str(error)[-2000:]}
        print(
            f"{recipe} over IPC: {rows[recipe].get('samples_per_s')} samples/s",
            rows[recipe].get("error", ""),
            flush=True,
        )
    rates = [rows[recipe].get("samples_per_s") for recipe in ("grpo", "async-grpo")]
    if all(rates):
        rows["async_vs_grpo"] = rates[1] / rates[0]
    return rows


def make_model(shape: str, work: Path) -> Path:
    model_dir = work / shape
    made = [sys.executable, str(HERE / "gpu_grpo_breakdown.py"), "--make-model", shape, str(model_dir),
            str(work / f"tokenizer-{SHAPES[shape]['vocab_size']}")]  # fmt: skip
    subprocess.run(made, check=True)
    return model_dir


def over_ipc(shape: str, model_dir: Path, args, work: Path, report: dict, row: dict) -> None:
    """The IPC server: its pushes; at a step shape the GRPO step through it (CUDA graphs, as colocate has
    them), and at the first step shape async-grpo and grpo."""
    stepped = shape in args.step_shapes
    server, url, row["ipc_server_start_s"] = start_server(
        model_dir, "shared-gpu", work / "server-cache", work / f"ipc-{shape}.log", not stepped,
        KV_CACHE_BYTES, "ipc",
    )  # fmt: skip
    row["ipc_server_enforce_eager"] = not stepped
    try:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
        row["push"] = push_cases(url, model_dir, PUSHES, args, env)
        if not stepped:
            return
        os.environ.update(BENCH_SERVER_URL=url, CUDA_VISIBLE_DEVICES="0", TRLSTACK_WEIGHT_TRANSFER="ipc")
        args.compile_cache = work / "trainer-cache"
        case = run_child(("grpo-server", shape, VARIANT), str(model_dir), args)
        row["step_server_ipc"] = summary(case, row["weights_bytes"])
        print(f"{shape} server over IPC: {row['step_server_ipc']}", flush=True)
        if shape == args.step_shapes[0] and args.async_steps:
            report["async_vs_grpo_ipc"] = {"shape": shape, **async_vs_grpo(args, url, model_dir, work)}
    finally:
        os.environ.pop("TRLSTACK_WEIGHT_TRANSFER", None)
        stop(server)


def over_nccl(shape: str, model_dir: Path, args, work: Path, row: dict) -> None:
    """The NCCL server (its own NCCL host, so sockets on the shared GPU): its pushes, through TRL's client."""
    server, url, row["nccl_server_start_s"] = start_server(
        model_dir,
        "shared-gpu",
        work / "server-cache",
        work / f"nccl-{shape}.log",
        True,
        KV_CACHE_BYTES,
        "nccl",
    )
    try:
        env = {
            **os.environ,
            "CUDA_VISIBLE_DEVICES": "0",
            "VLLM_HOST_IP": "127.0.0.1",
            **nccl_host_id("train"),
        }
        row["push"]["nccl-sockets"] = push_cases(url, model_dir, ("nccl",), args, env)["nccl"]
    finally:
        stop(server)


def colocated(shape: str, model_dir: Path, args, work: Path, row: dict) -> None:
    if shape not in args.step_shapes:
        return
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    args.compile_cache = work / "colocate-cache"
    row["step_colocate"] = summary(
        run_child(("grpo", shape, VARIANT), str(model_dir), args), row["weights_bytes"]
    )
    print(f"{shape} colocate: {row['step_colocate']}", flush=True)
    server_s = row.get("step_server_ipc", {}).get("step_s")
    colocate_s = row["step_colocate"].get("step_s")
    if server_s and colocate_s:
        row["server_ipc_vs_colocate_step"] = server_s / colocate_s


def study(args: argparse.Namespace, argv: list[str]) -> int:
    if args.out == Path("bench/results/gpu_server_mode.json"):
        args.out = Path("bench/results/gpu_ipc.json")  # never over the NCCL study's results
    keys = ("steps", "skip", "batch", "generations", "completion_tokens", "prompt_words")
    args.passthrough = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in keys]
    found = probe().gpus
    if not found:
        raise SystemExit("gpu_server_mode.py --ipc needs a GPU (NVML shows none)")
    gpu = found[0]
    largest, why = largest_fitting(gpu.memory_bytes or 80 << 30)
    shapes = list(dict.fromkeys(args.shapes or ["0.5B", "1.5B", largest]))
    args.step_shapes = [shape for shape in shapes if args.step_shapes is None or shape in args.step_shapes]
    work = Path(tempfile.mkdtemp(prefix="ipc-bench-"))
    report: dict = {
        "benchmark": "CUDA IPC against NCCL sockets on one GPU: the push, the GRPO step against colocate, "
        "async-grpo against grpo",
        "command": " ".join(["python", "bench/gpu_server_mode.py", *argv]),
        "gpu": gpu.name, "largest_shape": largest, "largest_why": why,
        "server_kv_cache_bytes": KV_CACHE_BYTES, "pushes": args.pushes, "variant": VARIANT,
        "step_shapes": args.step_shapes,
        **{k: getattr(args, k) for k in keys}, "versions": versions(), "shapes": {},
    }  # fmt: skip

    def write() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")

    for shape in shapes:
        model_dir = make_model(shape, work)
        row: dict = {"weights_bytes": weights_bytes(model_dir)}
        report["shapes"][shape] = row
        over_ipc(shape, model_dir, args, work, report, row)
        write()
        over_nccl(shape, model_dir, args, work, row)
        write()
        colocated(shape, model_dir, args, work, row)
        write()
    plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")
    return 0


def plot(report: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(report["shapes"])
    figure, (push, step, overlap) = plt.subplots(1, 3, figsize=(13, 4))
    transports = (*PUSHES, "nccl-sockets")
    width = 0.8 / len(transports)
    for offset, transport in enumerate(transports):
        rates = [report["shapes"][s].get("push", {}).get(transport, {}).get("gb_per_s") or 0 for s in shapes]
        bars = push.bar([i + offset * width for i in range(len(shapes))], rates, width, label=transport)
        push.bar_label(bars, labels=[f"{rate:.1f}" if rate else "" for rate in rates], fontsize=7)
    push.set_xticks([i + width for i in range(len(shapes))], shapes)
    push.set_ylabel("GB/s per push")
    push.set_title("weight push, one GPU", fontsize=9)
    push.legend(fontsize=7)
    for offset, (key, label) in enumerate(
        (("step_server_ipc", "server, CUDA IPC"), ("step_colocate", "colocate"))
    ):
        seconds = [report["shapes"][s].get(key, {}).get("step_s") or 0 for s in shapes]
        bars = step.bar([i + offset * 0.4 for i in range(len(shapes))], seconds, 0.4, label=label)
        step.bar_label(bars, labels=[f"{s:.2f}" if s else "" for s in seconds], fontsize=7)
    step.set_xticks([i + 0.2 for i in range(len(shapes))], shapes)
    step.set_ylabel("GRPO step, s (median)")
    step.set_title("step: shared-GPU server against colocate", fontsize=9)
    step.legend(fontsize=7)
    rows = report.get("async_vs_grpo_ipc", {})
    names = [name for name in gpu_async_grpo.RECIPES if "samples_per_s" in rows.get(name, {})]
    bars = overlap.bar(
        names, [rows[name]["samples_per_s"] for name in names], color=["#888888", "#3a7dc9"][: len(names)]
    )
    overlap.bar_label(bars, fmt="%.1f", fontsize=7)
    overlap.set_ylabel("completions per second")
    overlap.set_title(f"over CUDA IPC at {rows.get('shape', '-')}, bf16 weights both", fontsize=9)
    figure.suptitle(f"{report['gpu']}: CUDA IPC against NCCL sockets", fontsize=10)
    figure.tight_layout()
    figure.savefig(out, dpi=150)
