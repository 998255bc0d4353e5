"""Train-step throughput and peak memory of each attention implementation x precision, on one CUDA GPU.

A Qwen2-shaped model (~0.34B parameters, random weights, made from a config: no Hub) takes full AdamW steps on
batch 8 x 2048 random tokens. Each case runs in its own process, so one case's memory peak, compile cache or
crash does not touch the others; all cases run side by side in one invocation. Per case: warm-up steps, then
timed steps (CUDA-synchronized wall clock); the figure is the median, with every sample kept in the JSON.
python bench/gpu_attention.py --out bench/results/gpu_attention.json

Precision "bf16" is what `bf16=True` does in TRL/transformers trainers: fp32 master weights and optimizer,
bf16 autocast for the forward and backward. "fp32" is plain fp32 (TF32 off, PyTorch's default).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from children import run_case  # bench/, the script's folder

IMPLEMENTATIONS = [
    "eager",
    "sdpa",
    "flex_attention",
    "flash_attention_4",
    "kernels-community/flash-attn3",
    "kernels-community/flash-attn2",
]
PRECISIONS = ["fp32", "bf16"]

# Qwen2 architecture at ~0.34B parameters (24 layers of width 1024, tied 32k embeddings).
MODEL = dict(
    vocab_size=32768,
    hidden_size=1024,
    intermediate_size=2816,
    num_hidden_layers=24,
    num_attention_heads=16,
    num_key_value_heads=16,
    max_position_embeddings=4096,
    rope_theta=1_000_000.0,
    tie_word_embeddings=True,
)


def not_runnable(implementation: str, precision: str) -> str | None:
    """Why a case cannot run here, decided before spending GPU time on it (None: try it)."""
    if "/" in implementation:
        return "Kernels Hub kernels are downloaded from the Hugging Face Hub, which this machine cannot reach"
    if implementation == "flash_attention_4":
        if (
            importlib.util.find_spec("flash_attn") is None
            or importlib.util.find_spec("flash_attn.cute") is None
        ):
            return "flash-attn-4 (PyPI) is not installed"
        if precision == "fp32":
            return "FlashAttention kernels take fp16/bf16 inputs only"
    return None


def one_case(implementation: str, precision: str, batch: int, seq: int, warmup: int, steps: int) -> dict:
    """Run in a child process: build the model, take warm-up and timed steps, report times and peak memory."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    device = torch.device("cuda")
    config = Qwen2Config(**MODEL, attn_implementation=implementation)
    model = Qwen2ForCausalLM(config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")
    generator = torch.Generator(device=device).manual_seed(1)

    def step() -> float:
        ids = torch.randint(0, MODEL["vocab_size"], (batch, seq), device=device, generator=generator)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if not torch.isfinite(loss):
            raise RuntimeError(f"loss is not finite: {loss.item()}")
        return time.perf_counter() - start

    torch.cuda.reset_peak_memory_stats()
    first = [step() for _ in range(warmup)]
    times = [step() for _ in range(steps)]
    median = statistics.median(times)
    return {
        "attn_implementation": model.config._attn_implementation,
        "parameters": sum(p.numel() for p in model.parameters()),
        "warmup_s": first,
        "step_s": times,
        "median_step_s": median,
        "tokens_per_s": batch * seq / median,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }


def run_child(implementation: str, precision: str, args: argparse.Namespace) -> dict:
    argv = [sys.executable, __file__, "--child", implementation, precision]
    argv += [
        "--batch",
        str(args.batch),
        "--seq",
        str(args.seq),
        "--warmup",
        str(args.warmup),
        "--steps",
        str(args.steps),
    ]
    return run_case(argv, args.case_timeout)


def environment() -> dict:
    import torch
    import transformers

    return {
        "gpu": torch.cuda.get_device_name(0),
        "capability": "sm_{}{}".format(*torch.cuda.get_device_capability(0)),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_attention.json"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per case (the median is reported)")
    parser.add_argument("--case-timeout", type=int, default=240)
    parser.add_argument("--only", nargs="*", help="implementations to run (default: all)")
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "PRECISION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_case(*args.child, args.batch, args.seq, args.warmup, args.steps)))
        return 0

    results = []
    for implementation in args.only or IMPLEMENTATIONS:
        for precision in PRECISIONS:
            reason = not_runnable(implementation, precision)
            case = (
                {"status": "not run", "reason": reason}
                if reason
                else run_child(implementation, precision, args)
            )
            case = {"attention": implementation, "precision": precision, **case}
            results.append(case)
            shown = (
                f"{case['tokens_per_s'] / 1e3:7.1f}k tok/s {case['peak_memory_gib']:6.1f} GiB"
                if case["status"] == "ok"
                else f"{case['status']}: {case['reason'][:150]}"
            )
            print(f"{implementation:>30} {precision:>5}  {shown}", flush=True)
    ok = {(c["attention"], c["precision"]): c for c in results if c["status"] == "ok"}
    baseline = ok.get(("eager", "fp32"))
    for case in results:
        if baseline and case["status"] == "ok":
            case["speedup_vs_fp32_eager"] = case["tokens_per_s"] / baseline["tokens_per_s"]
            case["memory_vs_fp32_eager"] = case["peak_memory_gib"] / baseline["peak_memory_gib"]
    report = {
        "benchmark": "train step (forward, backward, AdamW) tokens/s and peak memory",
        "model": {"architecture": "Qwen2ForCausalLM", **MODEL},
        "batch": args.batch,
        "sequence_length": args.seq,
        "warmup_steps": args.warmup,
        "timed_steps": args.steps,
        "environment": environment(),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
