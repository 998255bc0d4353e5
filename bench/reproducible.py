"""Reproducibility benchmark: build the trlstack image twice from this commit, each time from clean caches
(the engine's build cache and the uv download cache mount cleared), and compare the two images layer by layer.
Writes bench/results/reproducible.json and bench/results/reproducible.png; where a layer differs, also
bench/results/reproducible-diff.txt: each file that differs and how (mode, owner, time, size, content hash),
read from both images' layers (`diffoscope` on the two layer tarballs shows the content of the change).

Usage (repository root, Docker engine from scripts/docker-engine.sh; this clears that engine's build cache):
    uv run --group bench python bench/reproducible.py
Settings (env): TRLSTACK_BASE_IMAGE (base image), TRLSTACK_CA_BUNDLE (CA bundle secret for a TLS proxy).
The digest compared is the image ID: the sha256 of the image config, which names every layer by the sha256 of
its content (diff ID), so equal IDs mean equal layers and equal metadata. Only one image is on disk at a time;
the images are removed afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import stat
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
TAGS = ("trlstack:repro-1", "trlstack:repro-2")


def build_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("WITH_KERNEL_CACHE", "0")
    for ours, bake in (("TRLSTACK_BASE_IMAGE", "BASE_IMAGE"), ("TRLSTACK_CA_BUNDLE", "CA_BUNDLE")):
        if os.environ.get(ours):
            env[bake] = os.environ[ours]
    return env


def cold_build(tag: str) -> float:
    """Clear every build cache record and cache mount, then build with docker/build.sh; returns seconds."""
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, stdout=subprocess.DEVNULL)
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "docker/build.sh", "--set", f"trlstack.tags={tag}"],
        cwd=REPO,
        env=build_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"build of {tag} failed:\n" + "\n".join(done.stderr.splitlines()[-30:]))
    return time.monotonic() - started


def inspect(tag: str) -> dict:
    return json.loads(
        subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=True).stdout
    )[0]


def summarize(manifest: dict[str, list]) -> tuple[str, float]:
    """A layer's main folder (the one holding most of its bytes, three levels deep) and its size in MB."""
    by_folder: dict[str, int] = {}
    for path, (mode, *_, size, _link, _content) in manifest.items():
        if mode.startswith("-"):
            folder = "/".join(path.split("/")[:3])
            by_folder[folder] = by_folder.get(folder, 0) + size
    if not by_folder:
        return "(no files)", 0.0
    return "/" + max(by_folder, key=by_folder.get), round(sum(by_folder.values()) / 1e6, 1)


def layer_manifests(tag: str) -> list[dict[str, list]]:
    """Per layer, oldest first: path -> [type, mode, uid, gid, mtime, size, link target, content sha256], read
    from the engine's overlay2 layer folders (what the layer tarballs are made from; `docker save` would first
    copy the whole image to disk). Needs root on the engine's machine, as the engine itself does."""
    image = inspect(tag)
    if image["GraphDriver"]["Name"] != "overlay2":
        raise SystemExit(
            f"comparing layers needs the overlay2 storage driver, not {image['GraphDriver']['Name']}"
        )
    data = image["GraphDriver"]["Data"]
    folders = (
        [*reversed(data["LowerDir"].split(":")), data["UpperDir"]]
        if data.get("LowerDir")
        else [data["UpperDir"]]
    )
    return [folder_manifest(Path(folder)) for folder in folders]


def folder_manifest(top: Path) -> dict[str, list]:
    entries = {}
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(folder) / name
            info = path.lstat()
            content = ""
            if stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256()
                with path.open("rb") as stream:
                    while chunk := stream.read(1 << 20):
                        digest.update(chunk)
                content = digest.hexdigest()
            link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
            entries[path.relative_to(top).as_posix()] = [
                stat.filemode(info.st_mode),
                info.st_uid,
                info.st_gid,
                int(info.st_mtime),
                0 if stat.S_ISDIR(info.st_mode) else info.st_size,  # a tar header gives folders no size
                link,
                content,
            ]
    return entries


def describe(a: list | None, b: list | None) -> str:
    if a is None or b is None:
        return "only in build 1" if b is None else "only in build 2"
    fields = ("mode", "uid", "gid", "mtime", "size", "link", "content")
    return ", ".join(f"{name} {x!r} vs {y!r}" for name, x, y in zip(fields, a, b, strict=True) if x != y)


def compare_layers(first: list[dict], second: list[dict], indices: list[int]) -> str:
    lines = []
    for index in indices:
        a, b = first[index], second[index]
        changed = [name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
        lines.append(f"layer {index}: {len(changed)} of {len(set(a) | set(b))} entries differ")
        lines += [f"  {name}: {describe(a.get(name), b.get(name))}" for name in changed]
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = results["layers"]
    fig, (ax_layers, ax_time) = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    colors = ["tab:green" if layer["same"] else "tab:red" for layer in layers]
    sizes = [max(layer["size_mb"], 0.01) for layer in layers]  # a log axis shows no zero
    ax_layers.bar(range(len(layers)), sizes, color=colors)
    ax_layers.set_yscale("log")
    ax_layers.set_xticks(
        range(len(layers)),
        [f"{layer['index']}: {layer['folder']}" for layer in layers],
        rotation=30,
        ha="right",
        fontsize=7,
    )
    ax_layers.set_ylabel("layer size (MB, log)")
    same = sum(layer["same"] for layer in layers)
    ax_layers.set_title(f"layers identical in both builds: {same} of {len(layers)} (green)")
    bars = ax_time.bar(["build 1", "build 2"], [b["build_s"] for b in results["builds"]], color="tab:blue")
    ax_time.bar_label(bars, fmt="%.0f s")
    ax_time.set_title("cold build time")
    verdict = "same image ID" if results["identical"] else "different image IDs"
    fig.suptitle(f"trlstack built twice from clean caches: {verdict} ({results['machine']['cpus']} CPUs)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", action="store_true", help="keep the second image (default: remove it)")
    args = parser.parse_args(argv)

    builds, manifests = [], []
    for tag in TAGS:
        seconds = cold_build(tag)
        image = inspect(tag)
        builds.append(
            {
                "tag": tag,
                "image_id": image["Id"],
                "build_s": round(seconds, 1),
                "labels": image["Config"]["Labels"],
                "diff_ids": image["RootFS"]["Layers"],
            }
        )
        print(tag, image["Id"], f"{seconds:.0f} s", flush=True)
        manifests.append(layer_manifests(tag))
        if tag != TAGS[-1]:  # one image on disk at a time: the next build starts from nothing anyway
            subprocess.run(["docker", "image", "rm", tag], stdout=subprocess.DEVNULL, check=True)
    first, second = builds
    layers = [
        {
            "index": index,
            "folder": summarize(manifests[1][index])[0],
            "size_mb": summarize(manifests[1][index])[1],
            "diff_id_1": a,
            "diff_id_2": b,
            "same": a == b,
        }
        for index, (a, b) in enumerate(zip(first["diff_ids"], second["diff_ids"], strict=True))
    ]
    results = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "engine": subprocess.run(
                ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True
            ).stdout.strip(),
        },
        "commit": first["labels"].get("org.opencontainers.image.revision"),
        "builds": [{k: v for k, v in b.items() if k != "diff_ids"} for b in builds],
        "identical": first["image_id"] == second["image_id"],
        "layers": layers,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    differing = [layer["index"] for layer in layers if not layer["same"]]
    (RESULTS / "reproducible-diff.txt").unlink(missing_ok=True)
    if differing:
        (RESULTS / "reproducible-diff.txt").write_text(compare_layers(*manifests, differing))
    (RESULTS / "reproducible.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, RESULTS / "reproducible.png")
    if not args.keep:
        subprocess.run(["docker", "image", "rm", TAGS[-1]], stdout=subprocess.DEVNULL, check=False)
    print("identical" if results["identical"] else f"layers differ: {differing}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
