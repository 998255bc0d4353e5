"""PNG plots of the GPU benchmarks' JSON (bench/results/gpu_*.json), one figure per benchmark.

python bench/gpu_plot.py            # reads and writes bench/results/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"fp32": "#9aa5b1", "bf16": "#2f6fb0", "vllm-colocate": "#2f6fb0", "generate": "#9aa5b1"}


def plot_attention(report: dict, out: Path) -> None:
    cases = report["results"]
    names = list(dict.fromkeys(case["attention"] for case in cases))
    precisions = list(dict.fromkeys(case["precision"] for case in cases))
    figure, (speed, memory) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(precisions)
    for offset, precision in enumerate(precisions):
        for index, name in enumerate(names):
            (case,) = [c for c in cases if c["attention"] == name and c["precision"] == precision]
            x = index + (offset - (len(precisions) - 1) / 2) * width
            if case["status"] != "ok":
                speed.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            label = precision if index == 0 or not speed.containers else None
            bar = speed.bar(x, case["tokens_per_s"] / 1e3, width, color=COLORS[precision], label=label)
            speed.bar_label(bar, fmt="%.0f", fontsize=7)
            bar = memory.bar(x, case["peak_memory_gib"], width, color=COLORS[precision])
            memory.bar_label(bar, fmt="%.0f", fontsize=7)
    for axes, title in ((speed, "train-step throughput (k tokens/s)"), (memory, "peak memory (GiB)")):
        axes.set_xticks(
            range(len(names)), [n.replace("kernels-community/", "hub:") for n in names], rotation=20
        )
        axes.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[p]) for p in precisions]
    speed.legend(handles, precisions)
    env = report["environment"]
    model = report["model"]
    figure.suptitle(
        f"{env['gpu']} ({env['capability']}), "
        f"Qwen2-shaped {model['num_hidden_layers']} x {model['hidden_size']}, "
        f"batch {report['batch']} x {report['sequence_length']}, "
        f"median of {report['timed_steps']} AdamW steps"
    )
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def plot_grpo(report: dict, out: Path) -> None:
    runs = [r for r in report["results"] if r["status"] == "ok"]
    figure, axes = plt.subplots(figsize=(6, 4))
    bars = axes.bar(
        [r["mode"] for r in runs], [r["median_step_s"] for r in runs], color=[COLORS[r["mode"]] for r in runs]
    )
    axes.bar_label(bars, fmt="%.2f s")
    axes.set_ylabel("seconds per GRPO step (median)")
    speedup = report.get("speedup_vllm_colocate_vs_generate")
    axes.set_title(
        f"GRPO, Qwen2.5-0.5B-shaped, {report['completions_per_step']} x {report['completion_tokens']}-token "
        f"completions/step" + (f"\nvLLM colocate {speedup:.1f}x faster" if speedup else "")
    )
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def plot_serve(report: dict, out: Path) -> None:
    runs = [r for r in report["runs"] if r["status"] == "ok"]
    figure, axes = plt.subplots(figsize=(6, 4))
    labels = [f"{r['kind']} {i + 1}" for i, r in enumerate(runs)]
    bars = axes.bar(labels, [r["seconds_to_healthy"] for r in runs], color="#2f6fb0")
    axes.bar_label(bars, fmt="%.0f s")
    axes.set_ylabel("seconds from launch to /health 200")
    axes.set_title("serve-vllm start-up (tiny model, TRL's server flags)")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


PHASE_ORDER = [
    "weight sync", "sleep/wake", "generation", "rewards", "old logprobs", "batch preparation (rest)",
    "loss forward", "loss (rest)", "backward", "optimizer", "other",
]  # fmt: skip


def plot_breakdown(report: dict, out: Path) -> None:
    """Stacked median seconds per phase: each grpo variant, and generation and training alone."""
    runs = [r for r in report["results"] if r["status"] == "ok"]
    labels = [f"{r['kind']}\n{r['shape']} {r['variant']}" for r in runs]
    figure, axes = plt.subplots(figsize=(max(7, 1.3 * len(runs)), 5))
    colors = plt.get_cmap("tab20")
    phases = [p for p in PHASE_ORDER if any(p in r["median_s"] for r in runs)]
    bottoms = [0.0] * len(runs)
    for index, phase in enumerate(phases):
        values = [r["median_s"].get(phase, 0.0) for r in runs]
        axes.bar(labels, values, bottom=bottoms, color=colors(index), label=phase)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for x, r in enumerate(runs):
        total = r["median_s"].get("step", r["median_s"].get("generation", 0.0))
        axes.text(x, total, f"{total:.2f} s", ha="center", va="bottom", fontsize=8)
    ratios = ", ".join(f"{o['shape']} {o['variant']}: {o['ratio']:.2f}" for o in report.get("overhead", []))
    axes.set_ylabel("seconds per step (median)")
    heading = f"GRPO colocated on one {report['gpu']}"
    axes.set_title(f"{heading}\noverhead step / (generate + train alone): {ratios}")
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def plot_sizes(report: dict, out: Path) -> None:
    """Seconds per step and peak memory per model shape and variant; OOM marked."""
    runs = report["results"]
    labels = [f"{r['shape']}\n{r['variant']}" for r in runs]
    figure, (speed, memory) = plt.subplots(1, 2, figsize=(max(9, 1.6 * len(runs)), 4.5))
    for x, r in enumerate(runs):
        if r["status"] != "ok":
            speed.text(x, 0, r["status"], ha="center", va="bottom", rotation=90)
            continue
        bar = speed.bar(x, r["median_s"]["step"], color="#2f6fb0")
        speed.bar_label(bar, fmt="%.2f", fontsize=7)
        bar = memory.bar(x, r.get("peak_memory_gib") or 0.0, color="#9aa5b1")
        memory.bar_label(bar, fmt="%.0f", fontsize=7)
    for axes, title in ((speed, "seconds per GRPO step (median)"), (memory, "peak GPU memory (GiB)")):
        axes.set_xticks(range(len(runs)), labels, fontsize=8)
        axes.set_title(title)
    figure.suptitle(f"GRPO colocated on one {report['gpu']}, Qwen2.5-shaped models")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def plot_memory(report: dict, out: Path) -> None:
    """Peak memory per case: torch's own counter and the whole GPU's (vLLM's allocations included)."""
    runs = [r for r in report["results"] if r["status"] == "ok"]
    labels = [f"{r['shape']}\n{r['variant']}" for r in runs]
    figure, axes = plt.subplots(figsize=(max(7, 1.6 * len(runs)), 4.5))
    x = range(len(runs))
    for offset, name, values, color in (
        (-0.2, "torch peak", [r.get("peak_memory_gib") or 0.0 for r in runs], "#9aa5b1"),
        (0.2, "GPU in use (nvidia-smi)", [(r.get("device_peak_mib") or 0) / 1024 for r in runs], "#2f6fb0"),
    ):
        bars = axes.bar([i + offset for i in x], values, width=0.4, color=color, label=name)
        axes.bar_label(bars, fmt="%.0f", fontsize=7)
    axes.set_xticks(list(x), labels, fontsize=8)
    axes.set_ylabel("peak GiB")
    axes.set_title(f"GRPO colocated on one {report['gpu']}\npeak memory, sleep mode off and on")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def plot_startup(report: dict, out: Path) -> None:
    """Process start to the first finished step, split: imports and data, trainer with vLLM engine, step 1."""
    runs = [r for r in report["results"] if r["status"] == "ok"]
    labels = [f"compile cache {r.get('compile_cache', '?')}" for r in runs]
    parts = {
        "imports and data": [r["first_step_after_s"] - r["init_s"] - r["steps"][0]["step"] for r in runs],
        "trainer and vLLM engine": [r["init_s"] for r in runs],
        "first step": [r["steps"][0]["step"] for r in runs],
    }
    figure, axes = plt.subplots(figsize=(6, 4.5))
    bottoms = [0.0] * len(runs)
    for name, values in parts.items():
        axes.bar(labels, values, bottom=bottoms, label=name)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for i, total in enumerate(bottoms):
        axes.text(i, total, f"{total:.1f} s", ha="center", va="bottom", fontsize=8)
    shape = runs[0]["shape"] if runs else ""
    axes.set_ylabel("seconds from process start")
    axes.set_title(f"GRPO {shape} colocated on one {report['gpu']}: start to first step")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def plot_server_mode(report: dict, out: Path) -> None:
    """Left: the GRPO step, server mode against colocate, per shape, with the push's GB/s. Right: (re)start
    to the first finished step, in parts, for the trainer against the warm server and for colocate."""
    shapes = report["shapes"]
    figure, (steps, starts) = plt.subplots(1, 2, figsize=(11, 4.5))
    runs = ("server_first", "server_restart", "colocate_cold", "colocate_warm")
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        values = [shapes[shape].get(run, {}).get("step_s") or 0.0 for shape in shapes]
        bars = steps.bar(
            [j + i * width for j in range(len(shapes))], values, width, label=run.replace("_", " ")
        )
        steps.bar_label(bars, fmt="%.2f", fontsize=7)
    steps.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))])
    steps.set_xticklabels(
        [
            f"{shape}\npush {shapes[shape].get('server_first', {}).get('push_gb_per_s') or 0:.1f} GB/s"
            for shape in shapes
        ]
    )
    steps.set_ylabel("seconds per GRPO step (median)")
    steps.legend(fontsize=8)
    steps.set_title("GRPO step: server mode vs colocate")

    cases = [
        (shape, run) for shape in shapes for run in runs if shapes[shape].get(run, {}).get("first_step_s")
    ]
    labels = [f"{shape} {run.replace('_', ' ')}" for shape, run in cases]
    rows = [shapes[shape][run] for shape, run in cases]
    parts = {
        "imports and data": [r["trainer_after_s"] for r in rows],
        "trainer made (model; engine or NCCL group)": [r["init_s"] for r in rows],
        "first step": [r["first_step_s"] for r in rows],
        "other": [
            r["first_step_after_s"] - r["trainer_after_s"] - r["init_s"] - r["first_step_s"] for r in rows
        ],
    }
    bottoms = [0.0] * len(rows)
    for name, values in parts.items():
        starts.barh(labels, values, left=bottoms, label=name)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for i, total in enumerate(bottoms):
        starts.text(total, i, f" {total:.1f} s", va="center", fontsize=8)
    starts.set_xlabel("seconds from process start to the first finished step")
    starts.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    starts.set_title("(re)start to the first step")
    figure.suptitle(f"one H200, {report['transport']}", fontsize=9)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


PLOTS = {
    "gpu_attention": plot_attention,
    "gpu_attention_fa4": plot_attention,
    "gpu_grpo": plot_grpo,
    "gpu_serve": plot_serve,
    "gpu_grpo_breakdown": plot_breakdown,
    "gpu_grpo_sizes": plot_sizes,
    "gpu_grpo_memory": plot_memory,
    "gpu_grpo_startup": plot_startup,
    "gpu_server_mode": plot_server_mode,
    "gpu_server_mode_1.5B": plot_server_mode,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    for name, plot in PLOTS.items():
        source = args.results / f"{name}.json"
        if source.exists():
            plot(json.loads(source.read_text()), args.results / f"{name}.png")
            print(f"wrote {args.results / name}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
