"""Image benchmark: size, cold build time and code-only rebuild time of the trlstack image
(docker/Dockerfile via docker/build.sh) next to a naive single-stage install of the same lock
(bench/naive.Dockerfile), measured side by side in one run.
Writes bench/results/image.json and bench/results/image.png.

Usage (repository root, Docker engine from scripts/docker-engine.sh):
    uv run --group bench python bench/image.py [--rebuilds 3] [--naive-rebuilds 1]
Settings (env): TRLSTACK_BASE_IMAGE (base image), TRLSTACK_CA_BUNDLE (CA bundle secret for a TLS proxy).
Cold means an empty build cache (the benchmark clears it, cache mounts included); code-only means one changed
line in the package. Afterwards the bench images are removed and the trlstack build cache is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
TARGETS = {"size_gb": 8.0, "code_rebuild_s": 15.0}
TAGS = {"trlstack": "trlstack:bench", "naive": "trlstack-naive:bench"}
COLORS = {"trlstack": "tab:blue", "naive": "tab:gray"}
CHANGED_FILE = Path("entrypoints/trlstack/__init__.py")


def build_argv(variant: str, context: Path, no_cache: bool) -> list[str]:
    """The build command of one variant, run with the context as working directory."""
    cache = ["--no-cache"] if no_cache else []
    if variant == "trlstack":
        return ["bash", "docker/build.sh", *cache, "--set", f"trlstack.tags={TAGS[variant]}"]
    secret = (
        [f"--secret=id=ca,src={os.environ['TRLSTACK_CA_BUNDLE']}"]
        if os.environ.get("TRLSTACK_CA_BUNDLE")
        else []
    )
    base = (
        [f"--build-arg=BASE_IMAGE={os.environ['TRLSTACK_BASE_IMAGE']}"]
        if os.environ.get("TRLSTACK_BASE_IMAGE")
        else []
    )
    return [
        "docker",
        "buildx",
        "build",
        "-f",
        "bench/naive.Dockerfile",
        *cache,
        *secret,
        *base,
        "-t",
        TAGS[variant],
        ".",
    ]


def build_env() -> dict[str, str]:
    # The copied context has no git history: the commit and its lock time come from the checkout.
    env = dict(os.environ, UV_LOCK_SHA256=hashlib.sha256((REPO / "uv.lock").read_bytes()).hexdigest())
    for name, argv in (
        ("GIT_COMMIT", ["rev-parse", "HEAD"]),
        ("SOURCE_DATE_EPOCH", ["log", "-1", "--format=%ct", "--", "uv.lock"]),
    ):
        done = subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, check=True)
        env[name] = done.stdout.strip()
    env.setdefault("WITH_KERNEL_CACHE", "0")
    for ours, bake in (("TRLSTACK_BASE_IMAGE", "BASE_IMAGE"), ("TRLSTACK_CA_BUNDLE", "CA_BUNDLE")):
        if os.environ.get(ours):
            env[bake] = os.environ[ours]
    return env


def timed_build(variant: str, context: Path, no_cache: bool = False) -> float:
    started = time.monotonic()
    subprocess.run(
        build_argv(variant, context, no_cache),
        cwd=context,
        env=build_env(),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return time.monotonic() - started


def drop_build_cache() -> None:
    """Forget every BuildKit cache record and cache mount (the uv download cache): the next build is cold."""
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, stdout=subprocess.DEVNULL)


def image_size_gb(tag: str) -> float:
    size = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(size) / 1e9


def copy_context(into: Path) -> Path:
    """A copy of the checkout (tracked and untracked files): edits never touch the checkout."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def measure(variant: str, context: Path, rebuilds: int) -> dict:
    drop_build_cache()
    cold = timed_build(variant, context, no_cache=True)
    code = []
    for n in range(rebuilds):
        with (context / CHANGED_FILE).open("a") as f:
            f.write(f"# rebuild {n}\n")
        code.append(timed_build(variant, context))
    return {
        "tag": TAGS[variant],
        "size_gb": round(image_size_gb(TAGS[variant]), 3),
        "cold_build_s": round(cold, 1),
        "code_rebuild_s": [round(s, 1) for s in code],
        "code_rebuild_median_s": round(statistics.median(code), 1),
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(results["variants"])
    panels = [
        ("size_gb", "image size (GB)", TARGETS["size_gb"]),
        ("cold_build_s", "cold build (s)", None),
        ("code_rebuild_median_s", "code-only rebuild, median (s)", TARGETS["code_rebuild_s"]),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 3.6))
    for ax, (key, title, target) in zip(axes, panels, strict=True):
        values = [results["variants"][v][key] for v in variants]
        bars = ax.bar(variants, values, color=[COLORS[v] for v in variants])
        ax.bar_label(bars, fmt="%.1f")
        ax.set_ylim(top=max(values + [target or 0]) * 1.25)
        if target is not None:
            ax.axhline(target, color="tab:red", linestyle="--", label=f"target {target:g}")
            ax.legend(loc="upper right")
        ax.set_title(title)
    fig.suptitle(f"trlstack image vs naive single-stage install ({results['machine']['cpus']} CPUs)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rebuilds", type=int, default=3, help="code-only rebuilds of the trlstack image")
    parser.add_argument(
        "--naive-rebuilds",
        type=int,
        default=1,
        help="code-only rebuilds of the naive image (each reinstalls the whole stack)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the bench images (default: remove them)")
    args = parser.parse_args(argv)

    results = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "engine": subprocess.run(
                ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True
            ).stdout.strip(),
        },
        "targets": TARGETS,
        "variants": {},
    }
    with tempfile.TemporaryDirectory(prefix="trlstack-bench-") as tmp:
        context = copy_context(Path(tmp))
        # Naive first: the trlstack build cache then stays behind for the test suite to reuse.
        for variant, rebuilds in (("naive", args.naive_rebuilds), ("trlstack", args.rebuilds)):
            results["variants"][variant] = measure(variant, context, rebuilds)
            print(variant, json.dumps(results["variants"][variant]), flush=True)
    ours, naive = results["variants"]["trlstack"], results["variants"]["naive"]
    results["ratios"] = {
        "size": round(ours["size_gb"] / naive["size_gb"], 3),
        "cold_build": round(ours["cold_build_s"] / naive["cold_build_s"], 3),
        "code_rebuild": round(ours["code_rebuild_median_s"] / naive["code_rebuild_median_s"], 3),
    }
    results["meets_targets"] = {
        "size_gb": ours["size_gb"] <= TARGETS["size_gb"],
        "code_rebuild_s": ours["code_rebuild_median_s"] <= TARGETS["code_rebuild_s"],
    }

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "image.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, RESULTS / "image.png")
    if not args.keep:
        subprocess.run(["docker", "image", "rm", *TAGS.values()], stdout=subprocess.DEVNULL, check=False)
    print(json.dumps(results["ratios"]), json.dumps(results["meets_targets"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
