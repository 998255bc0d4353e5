"""DDP against FSDP2 on 2 ranks: each rank's peak GPU memory and step time for Qwen2.5-1.5B- and 7B-shaped
decoders (random weights, float32 with bf16 autocast and AdamW, as TRL trains by default), beside the estimate
`trlstack plan --model` and `train --sharding auto` go by (plan/memory.py). Each case runs in processes of its
own (children.py), so an out-of-memory ends only that case; the JSON and a plot go to bench/results/.

    python bench/gpu_fsdp.py                      # 2 GPUs, one rank each
    python bench/gpu_fsdp.py --ranks-per-gpu 2    # 1 GPU, both ranks on it (each its own NCCL_HOSTID)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from children import run_case
from trlstack.plan import memory
from trlstack.ports import free_port

HERE = Path(__file__).resolve().parent
QWEN = {"tie_word_embeddings": True, "num_key_value_heads": 2, "vocab_size": 151936}
SHAPES = {
    "qwen2.5-1.5b": {
        **QWEN, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
        "num_attention_heads": 12,
    },
    "qwen2.5-7b": {
        **QWEN, "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "tie_word_embeddings": False,
    },
}  # fmt: skip
WRAPPER = HERE.parent / "tests" / "gpu" / "rank_host_id.sh"


def case(name: str, sharding: str, args: argparse.Namespace) -> dict:
    shape = SHAPES[name]
    estimate, _ = memory.estimate({"model_type": "qwen2", **shape}, "grpo", {})
    assert estimate is not None
    # Every DDP rank holds the whole model, its gradients, its optimizer states and DDP's gradient buckets,
    # whatever the rank count: where the ranks share one GPU, two such replicas cannot both fit, so DDP's
    # per-rank figure is measured on one rank there (what each of two ranks on two GPUs would hold).
    ranks = 1 if sharding == "none" and args.ranks_per_gpu == 2 else 2
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks), "--master_port"]
    argv += [str(free_port())]
    env = dict(os.environ)
    if args.ranks_per_gpu == 2:  # NCCL refuses two ranks on one GPU of one host: each rank a host of its own
        argv += ["--no-python", str(WRAPPER), sys.executable]
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    argv += [str(HERE / "gpu_fsdp_case.py"), json.dumps(shape), sharding, str(args.steps)]
    argv += [str(args.batch), str(args.length)]
    result = run_case(argv, timeout=args.timeout, env=env)
    result.update(model=name, sharding=sharding, ranks=ranks)
    result.update(estimate_bytes=estimate.per_process(sharding == "fsdp2", 2))
    return result


def summarise(result: dict) -> dict:
    """The median step time after the first (which warms up); run_case keeps the last rank's line, and the
    ranks hold equal shares."""
    if result.get("status") == "ok":
        times = result.pop("step_s")[1:] or [0.0]  # the first step warms up
        result["median_step_s"] = statistics.median(times)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--ranks-per-gpu", type=int, choices=(1, 2), default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--timeout", type=float, default=420)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "gpu_fsdp.json")
    args = parser.parse_args()
    results = [
        summarise(case(name, sharding, args)) for name in args.models for sharding in ("none", "fsdp2")
    ]
    report = {"ranks": 2, "ranks_per_gpu": args.ranks_per_gpu, "batch": args.batch, "length": args.length}
    report["results"] = results
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    print(json.dumps(report, indent=2))
    return 0


def plot(report: dict, out: Path) -> None:
    """Measured peak per rank beside the estimate of the states (bars), and the median step time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = report["results"]
    labels = [f"{c['model']}\n{'DDP' if c['sharding'] == 'none' else 'FSDP2'}" for c in cases]
    figure, (peak, speed) = plt.subplots(1, 2, figsize=(12, 4.5))
    xs = range(len(cases))
    measured = [c.get("peak_bytes", c.get("peak_at_least_bytes", 0)) / memory.GIB for c in cases]
    estimated = [c["estimate_bytes"] / memory.GIB for c in cases]
    peak.bar([x - 0.2 for x in xs], measured, 0.4, label="measured peak (a rank)", color="#2f6fb0")
    peak.bar([x + 0.2 for x in xs], estimated, 0.4, label="estimate: model states", color="#9aa5b1")
    for x, c in zip(xs, cases, strict=True):
        if c["status"] != "ok":  # an OOM's bar is what it held when it ran out: a floor
            peak.text(x, measured[x] + 1, f"{c['status']} (at least)", ha="center")
    peak.set_xticks(list(xs), labels)
    peak.set_ylabel("GiB per rank")
    peak.legend()
    speed.bar(list(xs), [c.get("median_step_s", 0) for c in cases], color="#2f6fb0")
    speed.set_xticks(list(xs), labels)
    speed.set_ylabel("median step (s)")
    shown = f"{report['ranks_per_gpu']} per GPU), batch {report['batch']} x {report['length']}"
    figure.suptitle(f"DDP vs FSDP2, 2 ranks ({shown}")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
