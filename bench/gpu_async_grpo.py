"""Samples per second of grpo and async-grpo in server mode: the same model, batch, completion length and
reward, through `train` as a user runs it, against one `serve-vllm` that stays up.

In a synchronous GRPO step the trainer waits while vLLM generates and vLLM waits while the trainer trains;
async-grpo (TRL's AsyncGRPOTrainer) overlaps the two, training on samples at most --max-staleness weight
syncs old. Layouts:

- `shared-gpu` (one GPU): the server and the trainer on GPU 0 (`--share-gpus`), so the two processes
  time-slice the one GPU: overlap can only fill the gaps each leaves, not add a second GPU's work;
- `two-gpu`: the server on GPU 0, the trainer on GPU 1, where overlap can hide generation behind training.

A random-weight Qwen2.5-0.5B-shaped model (bench/gpu_grpo.py's), whose completions run to
--completion-tokens; prompts of --prompt-words words; tests/gpu/rewards.py's varied_reward. A step's end is
the trainer's log line for it (logging_steps 1), timestamped as it arrives; samples/s counts completions
(--batch a step) over the steps after the first --skip. Writes JSON and, with --plot, a bar chart.

    python bench/gpu_async_grpo.py --layout shared-gpu --out bench/results/gpu_async_grpo.json --plot
    python bench/gpu_async_grpo.py --layout two-gpu --out bench/results/gpu_async_grpo_two_gpu.json --plot
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gpu_grpo import words  # noqa: E402
from gpu_grpo_breakdown import versions  # noqa: E402
from server_cases import LAYOUTS, start_server, stop  # noqa: E402

RECIPES = ("grpo", "async-grpo")
REWARD = "rewards.varied_reward"  # tests/gpu/rewards.py


def make_model(work: Path, shape: str) -> Path:
    model_dir = work / shape
    made = [sys.executable, str(HERE / "gpu_grpo_breakdown.py"), "--make-model", shape, str(model_dir),
            str(work / f"tokenizer-{shape}")]  # fmt: skip
    subprocess.run(made, check=True)
    return model_dir


def make_dataset(work: Path, prompt_words: int) -> Path:
    vocabulary = words(5000)
    folder = work / "prompts"
    folder.mkdir()
    rows = (" ".join(vocabulary[(7 * i + j) % 5000] for j in range(prompt_words)) for i in range(4096))
    (folder / "train.jsonl").write_text("".join(json.dumps({"prompt": row}) + "\n" for row in rows))
    return folder


def train_argv(
    recipe: str, args: argparse.Namespace, url: str, model: Path, data: Path, out: Path
) -> list[str]:
    shared = LAYOUTS[args.layout][2]
    argv = ["train", recipe, "--vllm-url", url, "--model", str(model), "--dataset", str(data),
            "--output-dir", str(out), "--fresh", *(["--share-gpus"] if shared else []),
            "--weight-transfer", getattr(args, "weight_transfer", "nccl")]  # fmt: skip
    if recipe == "async-grpo":
        argv += ["--max-staleness", str(args.max_staleness)]
    argv += ["--", "--reward_funcs", REWARD, "--max_steps", str(args.steps), "--logging_steps", "1",
             "--save_strategy", "no", "--per_device_train_batch_size", str(args.batch),
             "--gradient_accumulation_steps", "1", "--num_generations", str(args.generations),
             "--max_completion_length", str(args.completion_tokens), "--warmup_steps", "0",
             "--report_to", "none"]  # fmt: skip
    if recipe == "async-grpo":
        argv += ["--token_budget", "0", "--dtype", "bfloat16"]
    elif getattr(
        args, "bf16_weights", False
    ):  # the same weights dtype as async-grpo's (gpu_server_mode --ipc)
        argv += ["--dtype", "bfloat16"]
    return argv


def run(recipe: str, args: argparse.Namespace, url: str, model: Path, data: Path, work: Path) -> dict:
    """One run: the arrival time of each step's log line, and what the trainer logged."""
    log = work / f"train-{recipe}.log"
    _, train_gpu, _ = LAYOUTS[args.layout]
    pythonpath = os.pathsep.join(
        filter(None, [str(HERE.parent / "tests" / "gpu"), os.environ.get("PYTHONPATH")])
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": train_gpu, "PYTHONPATH": pythonpath}
    argv = train_argv(recipe, args, url, model, data, work / f"out-{recipe}")
    started = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stamps, logged, attention = [], [], []
    assert child.stdout is not None
    with log.open("w") as sink:
        for line in child.stdout:
            sink.write(line)
            if line.startswith(("train: attention ", "train: async-grpo: tree attention kernel: ")):
                attention.append(line.split(": ", 1)[1].strip())
            if line.startswith("{") and "'loss'" in line:
                stamps.append(time.perf_counter() - started)
                logged.append(line.strip())
    code = child.wait(timeout=args.case_timeout)
    if code != 0:
        raise SystemExit(f"train {recipe} exited {code}; see {log}:\n{log.read_text()[-3000:]}")
    return {"stamps": stamps, "logged": logged, "attention": attention[-1:]}


def summary(case: dict, args: argparse.Namespace) -> dict:
    stamps = case["stamps"]
    if len(stamps) <= args.skip + 1:
        return {"error": f"{len(stamps)} steps logged", **case}
    measured = stamps[args.skip :]
    seconds = measured[-1] - measured[0]
    steps = len(measured) - 1
    row = {
        "samples_per_s": args.batch * steps / seconds,
        "step_s": seconds / steps,
        "first_step_s": stamps[0],
        "steps_measured": steps,
        "stamps": stamps,
        "attention": case["attention"][0] if case["attention"] else "not logged",
    }
    staleness = [line for line in case["logged"] if "sample/staleness_max" in line]
    if staleness:
        import ast

        row["staleness_max"] = max(ast.literal_eval(line)["sample/staleness_max"] for line in staleness)
    return row


def plot(report: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name in RECIPES if "samples_per_s" in report["recipes"].get(name, {})]
    values = [report["recipes"][name]["samples_per_s"] for name in names]
    figure, axis = plt.subplots(figsize=(5.5, 3.8))
    bars = axis.bar(names, values, color=["#888888", "#3a7dc9"][: len(names)])
    axis.bar_label(bars, fmt="%.1f")
    axis.set_ylabel("completions per second")
    speedup = report.get("async_vs_grpo")
    title = f"{report['shape']} server mode, {report['layout']}"
    title += f": async-grpo {speedup:.2f}x" if speedup else ""
    sharing = report["gpu_sharing"].replace("; ", ";\n")
    axis.set_title(f"{title}\n{sharing}", fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=150)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=LAYOUTS, default="shared-gpu")
    parser.add_argument("--shape", default="0.5B")
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_async_grpo.json"))
    parser.add_argument("--plot", action="store_true", help="also write the chart beside --out (.png)")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--skip", type=int, default=4, help="first steps left out (compile, cold sync)")
    parser.add_argument("--batch", type=int, default=16, help="completions per step")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt")
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--max-staleness", type=int, default=4, help="async-grpo's (TRL's default)")
    parser.add_argument("--case-timeout", type=int, default=900)
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=RECIPES)
    parser.add_argument(
        "--weight-transfer",
        choices=("nccl", "ipc"),
        default="nccl",
        help="how the weights reach the server (the figures recorded below: nccl; ipc needs shared-gpu)",
    )
    parser.add_argument(
        "--bf16-weights",
        action="store_true",
        help="grpo's weights in bf16 too (`-- --dtype bfloat16`), as async-grpo's always are: like for like",
    )
    parser.add_argument(
        "--measure-after",
        type=Path,
        help="start the server now, but run no trainer before this file exists (other GPU work can end while "
        "the engine compiles; the server's start time is then not comparable)",
    )
    parser.add_argument(
        "--kv-cache-bytes",
        type=int,
        help="the server's KV cache, fixed (vLLM's --kv-cache-memory-bytes): its start skips vLLM's memory "
        "profiling, which aborts when other processes free GPU memory meanwhile (with --measure-after)",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="async-grpo-bench-"))
    shared = LAYOUTS[args.layout][2]
    report: dict = {
        "benchmark": "samples/s of grpo and async-grpo in server mode: same model, batch and reward",
        "layout": args.layout,
        "gpu_sharing": "one GPU time-sliced by the server and the trainer; pushes "
        + ("through CUDA IPC" if args.weight_transfer == "ipc" else "over NCCL sockets, not P2P")
        if shared
        else "one GPU each",
        # each recipe's own default: grpo trains float32 weights under bf16 autocast (TRL's), async-grpo bf16
        # weights (its recipe: the server's dtype, which its weight sync needs); --bf16-weights: bf16 both
        "weights_dtype": {
            "grpo": "bfloat16 (-- --dtype bfloat16)" if args.bf16_weights else "float32 (bf16 autocast)",
            "async-grpo": "bfloat16",
        },
        "shape": args.shape,
        **{
            key: getattr(args, key)
            for key in (
                "steps",
                "skip",
                "batch",
                "generations",
                "completion_tokens",
                "prompt_words",
                "max_staleness",
            )
        },  # fmt: skip
        "reward": REWARD,
        "versions": versions(),
        "recipes": {},
    }

    def write() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")

    model, data = make_model(work, args.shape), make_dataset(work, args.prompt_words)
    server, url, report["server_start_s"] = start_server(
        model, args.layout, work / "server-cache", work / "server.log", False, args.kv_cache_bytes,
        args.weight_transfer,
    )  # fmt: skip
    report["server_kv_cache_bytes"] = args.kv_cache_bytes or "profiled by vLLM"
    if args.measure_after is not None:
        report["server_start_note"] = "started while other GPU work ran (--measure-after)"
        while not args.measure_after.exists():
            time.sleep(1)
    try:
        for recipe in args.recipes:
            report["recipes"][recipe] = summary(run(recipe, args, url, model, data, work), args)
            print(f"{recipe}: {report['recipes'][recipe].get('samples_per_s')} samples/s", flush=True)
            write()
    finally:
        stop(server)
    rates = {name: row.get("samples_per_s") for name, row in report["recipes"].items()}
    if rates.get("grpo") and rates.get("async-grpo"):
        report["async_vs_grpo"] = rates["async-grpo"] / rates["grpo"]
    write()
    if args.plot:
        plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
