"""Start-up time of the trlstack commands (and of `trlstack check-task` on the task `trlstack init` writes,
the whole check), side by side with a bare `python -c pass`, and proof that none of them imports torch.

    uv run --group bench python bench/startup.py [--runs 21]

Every command runs as a fresh process, interleaved round by round so that machine noise hits all of them
alike; the medians, their ratio to the bare interpreter, and the slowest imports of `trlstack.cli` (from
`python -X importtime`) go to bench/results/startup.json, and a plot to bench/results/startup.png.
Exit 1 when a command fails, misses the target, or imports torch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.3
HEAVY = ("torch", "vllm", "trl", "transformers", "accelerate")
ROLE_MODULES = ("trlstack.cli", "trlstack.roles.serve", "trlstack.roles.train")
RESULTS = Path(__file__).resolve().parent / "results"


def commands(bindir: Path, task: Path) -> dict[str, list[str]]:
    """What a user types, as the venv's console scripts run it; `task` is a folder `trlstack init` wrote."""
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "trlstack --help": [str(bindir / "trlstack"), "--help"],
        "serve-vllm --help": [str(bindir / "serve-vllm"), "--help"],
        "train --help": [str(bindir / "train"), "--help"],
        "trlstack plan --gpus 8 --format env": [
            str(bindir / "trlstack"),
            "plan",
            "--gpus",
            "8",
            "--format",
            "env",
        ],
        # The whole check of the scaffold: config, both rewards imported and called on 2 rows, its data.
        "trlstack check-task (init's task)": [str(bindir / "trlstack"), "check-task", str(task)],
    }


def clean_env() -> dict[str, str]:
    """This environment without trlstack settings, so every command runs on its defaults."""
    return {key: value for key, value in os.environ.items() if not key.startswith("TRLSTACK_")}


def time_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode().strip()[-500:]}"
        )
    return elapsed


def measure(argvs: dict[str, list[str]], runs: int, warmup: int = 2) -> dict[str, list[float]]:
    env = clean_env()
    samples: dict[str, list[float]] = {name: [] for name in argvs}
    for round_number in range(warmup + runs):
        for name, argv in argvs.items():
            elapsed = time_once(argv, env)
            if round_number >= warmup:
                samples[name].append(elapsed)
    return samples


def heavy_imports() -> dict[str, list[str]]:
    """For each role module, which heavy packages importing it pulls in (all should be empty)."""
    found = {}
    for module in ROLE_MODULES:
        code = f"import sys, json, {module}; print(json.dumps(sorted(set({HEAVY!r}) & set(sys.modules))))"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
        if done.returncode != 0:
            raise RuntimeError(f"import {module} failed: {done.stderr.strip()[-500:]}")
        found[module] = json.loads(done.stdout)
    return found


def slowest_imports(module: str, top: int = 10) -> list[dict[str, object]]:
    """The imports with the largest cumulative time under `python -X importtime -c 'import module'`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        rows.append({"module": name.strip(), "cumulative_ms": int(cumulative) / 1000})
    return sorted(rows, key=lambda row: row["cumulative_ms"], reverse=True)[:top]


def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    baseline = statistics.median(samples["python -c pass"])
    summary = {}
    for name, values in samples.items():
        quartiles = statistics.quantiles(values, n=4)
        median = statistics.median(values)
        summary[name] = {
            "median_s": round(median, 4),
            "q1_s": round(quartiles[0], 4),
            "q3_s": round(quartiles[2], 4),
            "ratio_to_python": round(median / baseline, 2),
            "over_python_s": round(median - baseline, 4),
            "runs": len(values),
        }
    return summary


def plot(summary: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)[::-1]
    medians = [summary[name]["median_s"] for name in names]
    low = [summary[name]["median_s"] - summary[name]["q1_s"] for name in names]
    high = [summary[name]["q3_s"] - summary[name]["median_s"] for name in names]
    colors = [
        "#999999"
        if name == "python -c pass"
        else "#c0392b"
        if summary[name]["median_s"] >= TARGET_S
        else "#3b75af"
        for name in names
    ]
    figure, axes = plt.subplots(figsize=(8, 3.2))
    axes.barh(names, medians, xerr=[low, high], color=colors, capsize=3)
    axes.axvline(TARGET_S, color="#555555", linestyle="--", label=f"target {TARGET_S} s")
    for y, name in enumerate(names):
        row = summary[name]
        axes.text(row["q3_s"], y, f"  {row['median_s'] * 1000:.0f} ms", va="center", fontsize=8)
    axes.set_xlabel("start-up time, median of fresh processes (s); bars: interquartile range")
    axes.set_title("trlstack command start-up (no torch import)")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="measured runs per command (at least 15)")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.runs < 15:
        parser.error("--runs must be at least 15 for a stable median")

    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as scratch:
        task = Path(scratch) / "task"
        subprocess.run([str(bindir / "trlstack"), "init", str(task)], check=True, capture_output=True)
        samples = measure(commands(bindir, task), args.runs)
    summary = summarize(samples)
    heavy = heavy_imports()
    over = [name for name, row in summary.items() if name != "python -c pass" and row["median_s"] >= TARGET_S]
    torch_free = not any(heavy.values())
    result = {
        "target_s": TARGET_S,
        "commands": summary,
        "heavy_imports": heavy,
        "torch_free": torch_free,
        "slowest_imports_of_trlstack_cli": slowest_imports("trlstack.cli"),
        "all_under_target": not over,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "samples_s": {name: [round(value, 5) for value in values] for name, values in samples.items()},
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(summary, args.output_dir / "startup.png")

    width = max(map(len, summary))
    for name, row in summary.items():
        print(
            f"{name.ljust(width)}  median {row['median_s'] * 1000:6.1f} ms  "
            f"(x{row['ratio_to_python']:.2f} python, +{row['over_python_s'] * 1000:.1f} ms)"
        )
    print(f"heavy modules imported: {heavy}")
    print(f"wrote {args.output_dir / 'startup.json'} and startup.png")
    if over:
        print(f"over the {TARGET_S} s target: {', '.join(over)}", file=sys.stderr)
    if not torch_free:
        print("a role imports a heavy module at start-up", file=sys.stderr)
    return 0 if torch_free and not over else 1


if __name__ == "__main__":
    raise SystemExit(main())
