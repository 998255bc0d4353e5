"""Bake the image's Kernels Hub cache: the Dockerfile's `kernels` stage runs this with the venv's Python.

The kernels are those docker/kernels/pyproject.toml lists. With docker/kernels/kernels.lock they are exactly
the revisions it pins; without it they are locked here first, as `kernels lock` does (the newest commit of
each listed major version, the hash of every build variant), and the new lock is what the image keeps and what
docker/build.sh prints to commit. `kernels download` then fetches this image's build variant (picked from the
venv's torch: its version, C++ ABI and CUDA version) and checks it against the lock; each kernel's version ref
(refs/vN, the major version pyproject.toml names) is written beside it, because `kernels` resolves a version
offline from those refs (transformers loads flash-attn2 as version 3, others as version 1), and the cache is
left as offline loading needs it (ready_offline).

WITH_KERNEL_CACHE (--mode): `auto` bakes them where the Hub answers and bakes none where it cannot be reached;
`1` fails the build where it cannot be reached; `0` bakes none. The Hub is HF_ENDPOINT (huggingface.co unset).
Writes to --outcome: kernels.txt, one line saying what was baked, or that nothing was and how to bake it, and,
when kernels were baked, kernels.lock (the lock the cache holds, also --cache/kernels.lock)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

MODES = ("auto", "1", "0")
PROBE_S = 15.0  # how long the Hub may take to answer before it counts as unreachable
LOCK = "kernels.lock"
SUMMARY = "kernels.txt"
# Where none is baked, train still runs: trlstack/policy.py picks a Hub kernel it can fetch, else sdpa.
LATER = "train loads them from the Hub at run time where it is reachable, else uses sdpa"


class Refusal(Exception):
    """A build that must stop: the message names the fix."""


def repo_folder(repo_id: str) -> str:
    """The cache folder of a kernel repository (huggingface_hub's repo_folder_name for repo type "kernel")."""
    return "kernels--" + repo_id.replace("/", "--")


def listed_versions(pyproject: Path) -> dict[str, int]:
    """repo id -> major version, from [tool.kernels.dependencies] (the table `kernels lock` reads)."""
    table = tomllib.loads(pyproject.read_text()).get("tool", {}).get("kernels", {}).get("dependencies")
    if not table:
        raise Refusal(f"{pyproject} lists no kernels under [tool.kernels.dependencies]")
    return dict(table)


def stale_lock(lock: list[dict], versions: dict[str, int]) -> str | None:
    """Why a committed lock does not fit pyproject.toml's kernels, or None when it locks exactly those."""
    locked = sorted(entry["repo_id"] for entry in lock)
    if locked == sorted(versions):
        return None
    return (
        f"docker/kernels/kernels.lock locks {locked} but docker/kernels/pyproject.toml lists "
        f"{sorted(versions)}: delete the lock and build where the Hub is reachable (docker/build.sh prints "
        "the new one to commit)"
    )


def hub_unreachable(repo_id: str, timeout: float = PROBE_S) -> str | None:
    """Why the Hub cannot be reached, or None when it answers (any answer, an error included: a Hub that
    refuses is a problem the lock or the download names, not a missing network)."""
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        HfApi().repo_info(repo_id, repo_type="kernel", timeout=timeout)
    except HfHubHTTPError:
        return None
    except (httpx.TransportError, OSError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def none_baked(why: str, fix: str) -> str:
    return f"kernels: baked no Hub kernels: {why}; {fix}; meanwhile {LATER}"


def unreachable_line(endpoint: str, reason: str) -> str:
    return none_baked(
        f"{endpoint} could not be reached ({reason})",
        "to bake them, build again where the Hub (or a mirror named by HF_ENDPOINT) is reachable",
    )


def baked_line(cache: Path, lock: list[dict], fresh: bool) -> str:
    """One line: each locked kernel at its commit with the build variant(s) the cache holds."""
    parts = []
    for entry in lock:
        build = cache / repo_folder(entry["repo_id"]) / "snapshots" / entry["sha"] / "build"
        variants = sorted(p.name for p in build.iterdir()) if build.is_dir() else []
        parts.append(f"{entry['repo_id']}@{entry['sha'][:12]} ({', '.join(variants) or 'no variant'})")
    how = "locked now from docker/kernels/pyproject.toml" if fresh else "as docker/kernels/kernels.lock pins"
    return f"kernels: baked {'; '.join(parts)}, {how}"


def ready_offline(cache: Path, lock: list[dict], versions: dict[str, int]) -> None:
    """Make the downloaded kernels load with HF_HUB_OFFLINE=1, as kernels 0.16.2 with huggingface_hub 1.33
    looks for them there.

    refs/vN -> the locked commit, for the version N pyproject.toml names: offline, `kernels` resolves a
    version from these refs (online, from the Hub's branches vN). And no tree listing (trees/COMMIT.json,
    which snapshot_download keeps): `kernels` first asks for the whole snapshot offline, and where a listing
    names files the cache lacks (the other build variants) huggingface_hub refuses it as incomplete; without
    one, it cannot tell and returns the folder, from which `kernels` picks the variant (the state a cache
    written file by file, or before listings were kept, is in)."""
    for entry in lock:
        folder = cache / repo_folder(entry["repo_id"])
        if not folder.is_dir():
            continue
        shutil.rmtree(folder / "trees", ignore_errors=True)
        version = versions.get(entry["repo_id"])
        if version is not None:
            (folder / "refs").mkdir(exist_ok=True)
            (folder / "refs" / f"v{version}").write_text(entry["sha"])


def kernels_cli(cache: Path, *argv: str | Path) -> None:
    """The venv's `kernels` command (its lock and download into `cache`), failing the build on its error."""
    command = Path(sys.executable).with_name("kernels")
    done = subprocess.run([str(command), *map(str, argv)], env={**os.environ, "KERNELS_CACHE": str(cache)})
    if done.returncode != 0:
        raise Refusal(
            f"`kernels {' '.join(map(str, argv))}` failed (exit {done.returncode}); its error is above"
        )


def bake(project: Path, cache: Path, mode: str) -> tuple[str, list[dict] | None]:
    """Lock (where no lock is committed) and download the kernels; the summary line and the lock baked."""
    versions = listed_versions(project / "pyproject.toml")
    committed = project / LOCK
    if committed.is_file():
        problem = stale_lock(json.loads(committed.read_text()), versions)
        if problem:
            raise Refusal(problem)
    reason = hub_unreachable(next(iter(versions)))
    if reason is not None:
        if mode == "1":
            raise Refusal(
                f"WITH_KERNEL_CACHE=1 but {hub_endpoint()} could not be reached ({reason}); build where "
                "it is reachable, name a mirror with HF_ENDPOINT, or build with WITH_KERNEL_CACHE=auto to "
                "bake none"
            )
        return unreachable_line(hub_endpoint(), reason), None
    with tempfile.TemporaryDirectory() as work:
        shutil.copy(project / "pyproject.toml", work)
        if committed.is_file():
            shutil.copy(committed, work)
        else:
            kernels_cli(cache, "lock", work)
        kernels_cli(cache, "download", work)
        lock = json.loads((Path(work) / LOCK).read_text())
        shutil.copy(Path(work) / LOCK, cache / LOCK)
    ready_offline(cache, lock, versions)
    return baked_line(cache, lock, fresh=not committed.is_file()), lock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", required=True, help="WITH_KERNEL_CACHE: auto, 1 or 0")
    parser.add_argument(
        "--project", type=Path, required=True, help="docker/kernels: pyproject.toml, the lock"
    )
    parser.add_argument("--cache", type=Path, required=True, help="KERNELS_CACHE, where the kernels go")
    parser.add_argument("--outcome", type=Path, required=True, help="where kernels.txt and kernels.lock go")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    args.outcome.mkdir(parents=True, exist_ok=True)
    try:
        if args.mode not in MODES:
            raise Refusal(f"WITH_KERNEL_CACHE={args.mode}: use auto (the default), 1 or 0")
        if args.mode == "0":
            line = none_baked(
                "WITH_KERNEL_CACHE=0", "to bake them, build with WITH_KERNEL_CACHE=auto (the default)"
            )
            lock = None
        else:
            line, lock = bake(args.project, args.cache, args.mode)
    except Refusal as refusal:
        print(f"kernels: {refusal}", file=sys.stderr)
        return 1
    if lock is not None:
        shutil.copy(args.cache / LOCK, args.outcome / LOCK)
    (args.outcome / SUMMARY).write_text(line + "\n")
    print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    if not os.environ.get("HF_ENDPOINT"):
        os.environ.pop("HF_ENDPOINT", None)  # an empty build argument means the default Hub, not an empty URL
    raise SystemExit(main())
