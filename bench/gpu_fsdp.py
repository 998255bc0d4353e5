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


def estimated(name: str, sharding: str) -> int:
    """What `trlstack plan --model` estimates a rank of the case holds (GRPO's defaults: float32 weights, bf16
    mixed precision, no reference model), with 2 ranks."""
    estimate, _ = memory.estimate({"model_type": "qwen2", **SHAPES[name]}, "grpo", {})
    assert estimate is not None
    return estimate.per_process(sharding == "fsdp2", 2)


def versus(result: dict) -> float | None:
    """The estimate over the measured peak (over the floor, what it held when it ran out of memory): above 1
    the estimate counts more than was measured. None where nothing was measured."""
    measured = result.get("peak_bytes", result.get("peak_at_least_bytes"))
    return round(result["estimate_bytes"] / measured, 3) if measured else None


def case(name: str, sharding: str, args: argparse.Namespace) -> dict:
    shape = SHAPES[name]
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
    result.update(estimate_bytes=estimated(name, sharding))
    result.update(estimate_vs_measured=versus(result))
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


def _layout(case: dict) -> str:
    ranks = case["ranks"]
    return f"{'DDP' if case['sharding'] == 'none' else 'FSDP2'}, {ranks} rank{'s' * (ranks > 1)}"


def plot(report: dict, out: Path) -> None:
    """Measured peak per rank beside the estimate (bars; an out-of-memory case's bar, hatched, is a floor),
    each estimate's ratio to it above, and the median step time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = report["results"]
    labels = [f"{c['model']}\n{_layout(c)}" for c in cases]
    figure, (peak, speed) = plt.subplots(1, 2, figsize=(13, 5))
    xs = range(len(cases))
    measured = [c.get("peak_bytes", c.get("peak_at_least_bytes", 0)) / memory.GIB for c in cases]
    estimated = [c["estimate_bytes"] / memory.GIB for c in cases]
    floors = ["//" if c["status"] != "ok" else "" for c in cases]
    bars = peak.bar([x - 0.2 for x in xs], measured, 0.4, label="measured peak (a rank)", color="#2f6fb0")
    for bar, hatch in zip(bars, floors, strict=True):
        bar.set_hatch(hatch)
        bar.set_edgecolor("white")
    peak.bar([x + 0.2 for x in xs], estimated, 0.4, label="estimate (plan/memory.py)", color="#9aa5b1")
    top = max(measured + estimated)
    for x, c in zip(xs, cases, strict=True):
        if c["status"] != "ok":  # an OOM's bar is what it held when it ran out: a floor
            peak.text(
                x - 0.2, measured[x] + top * 0.01, f"{c['status']}\n(at least)", ha="center", va="bottom"
            )
        ratio = c.get("estimate_vs_measured")
        if ratio is not None:
            peak.text(x + 0.2, estimated[x] + top * 0.01, f"x{ratio:.2f}", ha="center", va="bottom")
    peak.set_ylim(0, top * 1.25)
    peak.set_xticks(list(xs), labels)
    peak.set_ylabel("GiB per rank")
    peak.set_title("peak memory; above each estimate: estimate / measured", fontsize=10)
    peak.legend(loc="upper left")
    steps = [c.get("median_step_s", 0) for c in cases]
    speed.bar(list(xs), steps, color="#2f6fb0")
    for x, c in zip(xs, cases, strict=True):
        shown = f"{steps[x]:.3g} s" if c["status"] == "ok" else c["status"]
        speed.text(x, steps[x] + max(steps) * 0.01, shown, ha="center", va="bottom")
    speed.set_ylim(0, max(steps) * 1.15 or 1)
    speed.set_xticks(list(xs), labels)
    speed.set_ylabel("median step (s)")
    speed.set_title("median step after the first", fontsize=10)
    per_gpu = report["ranks_per_gpu"]
    shown = f"{per_gpu} rank{'s' * (per_gpu > 1)} per GPU, batch {report['batch']} x {report['length']}"
    figure.suptitle(f"DDP vs FSDP2, {shown}")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
