"""The Kernels Hub cache against its kernels.lock: every locked kernel at its revision, every build variant
hashing to the lock's value (the `kernels` library's own check), every ref (refs/vN, by which `kernels` finds
a version offline) naming the locked revision, nothing else.

The `kernels` library and huggingface_hub are imported only when there is a lock to check: the image's venv
holds them, the rest of verify needs only the standard library."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trlstack.commands.verify.layout import KERNELS
from trlstack.commands.verify.report import Finding, Report


def check_kernels(root: Path | None, report: Report) -> None:
    """The Kernels Hub cache against its kernels.lock, with the `kernels` library's own hash check."""
    cache = None if root is None else root / KERNELS
    if cache is None:
        report.facts.append("kernel cache: checked only on a file system (inside the container or --root)")
        return
    lock_path = cache / "kernels.lock"
    if not lock_path.exists():
        names = sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []
        if names:
            report.add("kernels", f"/{KERNELS}", f"holds {names} but no kernels.lock")
        else:
            report.facts.append("kernel cache: empty (the build baked no Hub kernels)")
        return
    for finding in kernel_cache_findings(cache, json.loads(lock_path.read_text())):
        report.findings.append(finding)
    report.facts.append(f"kernel cache matches {lock_path}")


def kernel_cache_findings(cache: Path, lock: list[dict[str, Any]]) -> Iterator[Finding]:
    """Differences between a Hugging Face cache of kernels and a kernels.lock (the `kernels lock` format)."""
    from huggingface_hub.file_download import repo_folder_name
    from kernels.utils import validate_kernel

    expected = {}
    for entry in lock:
        folder = cache / repo_folder_name(repo_id=entry["repo_id"], repo_type="kernel")
        expected[folder.name] = entry
        snapshot = folder / "snapshots" / entry["sha"]
        subject = f"{entry['repo_id']}@{entry['sha']}"
        variants = (
            sorted(p.name for p in (snapshot / "build").iterdir()) if (snapshot / "build").is_dir() else []
        )
        if not variants:
            yield Finding("kernels", subject, "locked but not in the cache")
        for variant in variants:
            lock_hash = entry["variants"].get(variant, {}).get("hash")
            if lock_hash is None:
                yield Finding(
                    "kernels", f"{subject} {variant}", "cached build variant the lock does not name"
                )
                continue
            try:
                validate_kernel(repo_path=snapshot, variant=variant, hash=lock_hash)
            except ValueError as error:
                yield Finding("kernels", f"{subject} {variant}", str(error))
        refs = folder / "refs"
        for ref in sorted(refs.iterdir()) if refs.is_dir() else []:
            named = ref.read_text().strip()
            if named != entry["sha"]:
                yield Finding(
                    "kernels", f"{entry['repo_id']} refs/{ref.name}", f"names {named}, not the locked commit"
                )
        snapshots = folder / "snapshots"
        for other in sorted(p.name for p in snapshots.iterdir()) if snapshots.is_dir() else []:
            if other != entry["sha"]:
                yield Finding(
                    "kernels", f"{entry['repo_id']}@{other}", "cached revision the lock does not name"
                )
    for folder in sorted(p for p in cache.iterdir() if p.is_dir() and p.name.startswith("kernels--")):
        if folder.name not in expected:
            yield Finding("kernels", folder.name, "cached kernel the lock does not name")
