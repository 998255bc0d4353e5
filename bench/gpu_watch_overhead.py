"""What watching a run costs a step: the same colocated GRPO run on one GPU without trlstack's watch, with it
(rank/watch.py: the step split's timers and GPU synchronisations, the memory all-gather, the progress line)
and with it plus trackio recording every step, each case in a process of its own, alternated (off, watch,
watch+trackio, then again) so that drift on the machine falls on every case alike.

The run is gpu_grpo_breakdown.py's `grpo` case at Qwen2.5-0.5B's shape (random weights, a tokenizer trained
on the spot, 16 completions of exactly 256 tokens a step), logging every step (the watch's worst case: it
adds most at logging steps). A case's step time is its wall time from the end of step SKIP to the end of the
last step, over the steps between (the GPU synchronised at both ends only), so GPU work a timer leaves queued
is counted wherever it ends. The overhead is mean(watch) / mean(off) - 1 over the repeats; the watched
cases' own split is kept too.

    python bench/gpu_watch_overhead.py --out bench/results/gpu_watch_overhead.json --plot

About 10 minutes of device time on one H100 or H200 (six cases of 40 steps, an engine start each).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "entrypoints"))
from children import run_case  # noqa: E402
from gpu_grpo import reward_early_letters  # noqa: E402
from gpu_grpo_breakdown import SHAPES, dataset_and_prompts, grpo_config, versions  # noqa: E402

MODES = ("off", "watch", "watch+trackio")


def step_clock(ends: list[float], skip: int):
    import torch
    from transformers import TrainerCallback

    class StepEnds(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in (skip, state.max_steps) and torch.cuda.is_available():
                torch.cuda.synchronize()  # the measured span starts and ends with the GPU idle
            ends.append(time.perf_counter())

    return StepEnds()


def run_mode(mode: str, model_dir: str, args: argparse.Namespace) -> dict:
    """One case, in this (child) process: GRPO for --steps steps; the step ends and what was logged."""
    import torch
    from trl import GRPOTrainer

    dataset, _ = dataset_and_prompts(args)
    output_dir = tempfile.mkdtemp(prefix=f"watch-{mode}-")
    # "train": gpu_grpo_breakdown's config without vLLM (transformers generates): --shape tiny on a CPU only
    config = grpo_config("grpo" if torch.cuda.is_available() else "train", "trl", args, output_dir)
    if mode == "watch+trackio":
        os.environ["TRACKIO_DIR"] = str(Path(output_dir) / "trackio")
        config.report_to, config.project, config.run_name = ["trackio"], "bench", mode
    if mode != "off":
        from trlstack.rank import watch

        watch.install()
    ends: list[float] = []
    trainer = GRPOTrainer(
        model=model_dir, reward_funcs=reward_early_letters, args=config, train_dataset=dataset,
        callbacks=[step_clock(ends, args.skip)],
    )  # fmt: skip
    if mode != "off":
        watch.attach(trainer, lambda line: None)
    trainer.train()
    timed = ends[args.skip - 1 :]
    walls = [later - earlier for earlier, later in zip(timed, timed[1:], strict=False)]
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    split = {key: statistics.mean(entry[key] for entry in logged[args.skip :]) for key in logged[-1]
             if key.startswith(("time/", "throughput/"))}  # fmt: skip
    return {
        "mode": mode,
        "step_s": (timed[-1] - timed[0]) / (len(timed) - 1),
        "median_step_s": statistics.median(walls),
        "timed_steps": len(walls),
        "split": split,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def summarise(results: list[dict]) -> dict:
    """Mean step time per mode over its repeats, and each watched mode's overhead against `off`."""
    ok = [r for r in results if r["status"] == "ok"]
    means = {mode: statistics.mean(r["step_s"] for r in ok if r["mode"] == mode) for mode in MODES
             if any(r["mode"] == mode for r in ok)}  # fmt: skip
    overhead = {mode: means[mode] / means["off"] - 1 for mode in means if mode != "off" and "off" in means}
    return {"mean_step_s": means, "overhead": overhead}


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (steps, split) = pyplot.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    ok = [r for r in report["results"] if r["status"] == "ok"]
    for index, mode in enumerate(MODES):
        values = [r["step_s"] for r in ok if r["mode"] == mode]
        steps.scatter([index] * len(values), values, color=f"C{index}", zorder=3)
        if values:
            steps.bar(index, statistics.mean(values), color=f"C{index}", alpha=0.4)
    labels = [f"{m}\n{100 * report['summary']['overhead'].get(m, 0):+.2f}%" for m in MODES]
    steps.set_xticks(range(len(MODES)), labels)
    steps.set_ylabel("seconds per step (mean of each case)")
    steps.set_title(f"watch overhead, GRPO 0.5B colocated ({report['gpu']})")
    watched = [r for r in ok if r["mode"] == "watch"]
    if watched:
        parts = {k: v for k, v in watched[0]["split"].items() if k.startswith("time/") and k != "time/step_s"}
        split.barh(list(parts), list(parts.values()))
        split.set_xlabel("seconds per step")
        split.set_title("where a watched step's time goes")
    figure.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_watch_overhead.json"))
    parser.add_argument("--plot", action="store_true", help="also write the PNG beside the JSON")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--shape", choices=("0.5B", "tiny"), default="0.5B", help="tiny: a CPU check of this script"
    )
    parser.add_argument("--child", nargs=2, metavar=("MODE", "MODEL_DIR"), help=argparse.SUPPRESS)
    knobs = parser.add_argument_group("run shape (passed to each case)")
    knobs.add_argument("--steps", type=int, default=40)
    knobs.add_argument("--skip", type=int, default=5, help="first steps left out")
    knobs.add_argument("--batch", type=int, default=16, help="completions per step")
    knobs.add_argument("--generations", type=int, default=8, help="completions per prompt")
    knobs.add_argument("--completion-tokens", type=int, default=256)
    knobs.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--case-timeout", type=int, default=600)
    args = parser.parse_args()
    shape_keys = ("steps", "skip", "batch", "generations", "completion_tokens", "prompt_words")
    passthrough = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in shape_keys]
    if args.child:
        print(json.dumps(run_mode(args.child[0], args.child[1], args)))
        return 0

    root = Path(tempfile.mkdtemp(prefix="watch-models-"))
    model_dir, tokenizer = root / args.shape, root / "tokenizer"
    # In a process of its own, so this one never holds GPU memory the cases need.
    breakdown = Path(__file__).with_name("gpu_grpo_breakdown.py")
    made = [sys.executable, str(breakdown), "--make-model", args.shape, str(model_dir), str(tokenizer)]
    subprocess.run(made, check=True)
    env = {**os.environ, "VLLM_CACHE_ROOT": tempfile.mkdtemp(prefix="watch-vllm-cache-")}
    env.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")  # as train runs vLLM (trlstack.defaults.VLLM_ENV)
    results: list[dict] = []
    for repeat in range(args.repeats):
        for mode in MODES:
            argv = [sys.executable, __file__, "--child", mode, str(model_dir), *passthrough]
            result = {"mode": mode, "repeat": repeat, **run_case(argv, args.case_timeout, env)}
            results.append(result)
            shown = f"{result['step_s']:.4f} s/step" if result["status"] == "ok" else result["reason"][:300]
            print(f"{mode:>14} #{repeat}: {shown}", flush=True)
    report = {
        "benchmark": "what trlstack's watch (rank/watch.py) costs a colocated GRPO step, logging every step",
        "shape": SHAPES[args.shape],
        **{k: getattr(args, k) for k in shape_keys},
        "gpu": next((r["gpu"] for r in results if r.get("gpu")), None),
        "versions": versions(),
        "results": results,
        "summary": summarise(results),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    for mode, value in report["summary"]["overhead"].items():
        print(f"overhead {mode}: {100 * value:+.2f}% of a step", flush=True)
    if args.plot:
        plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
