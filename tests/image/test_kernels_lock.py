"""The Kernels Hub cache is pinned by kernels.lock: `trlstack verify --only kernels` (which the image build
runs after `kernels download`) passes only when the cache holds exactly the locked revisions and build
variants, each hashing to the lock's value by the `kernels` library's own check, and its version refs name the
locked revisions.

The Hub cannot be reached here, so a test double stands in for it: a kernel cache laid out as `kernels
download` leaves one (a Hugging Face cache: blobs named by their git or LFS hash, snapshots of symlinks), made
in the container, with the kernels.lock `kernels lock` would write for it (its hash computed here)."""

from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.docker

# Runs in the image: makes the cache and lock under ROOT/opt/trlstack/kernels, then runs verify on it for each
# case, printing `CASE exit-code` and verify's output.
SCRIPT = r"""
import hashlib, json, os, shutil, subprocess, sys
from pathlib import Path

ROOT = Path("/tmp/image")
CACHE = ROOT / "opt/trlstack/kernels"
REPO, SHA, VARIANT = "trlstack-test-double/attention", "1" * 40, "torch211-cxx11-cu130-x86_64-linux"
FILES = {  # path in the variant -> (content, stored as an LFS blob?)
    "attention/__init__.py": (b"from ._ops import ops\n", False),
    "attention/_ops.py": (b"ops = None\n", False),
    "attention/_attention.abi3.so": (b"\x7fELF" + bytes(4096), True),
}

def git_blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

def make_cache(sha=SHA):
    folder = CACHE / ("kernels--" + REPO.replace("/", "--"))
    for path, (data, lfs) in FILES.items():
        blob = hashlib.sha256(data).hexdigest() if lfs else git_blob(data)
        (folder / "blobs").mkdir(parents=True, exist_ok=True)
        (folder / "blobs" / blob).write_bytes(data)
        link = folder / "snapshots" / sha / "build" / VARIANT / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(folder / "blobs" / blob, link.parent))
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(sha)
    return folder

def lock_hash():
    # kernels lock: sha256 over the sorted (path, git blob sha1 or LFS sha256) pairs of the variant's files.
    m = hashlib.sha256()
    for path, (data, lfs) in sorted((p.encode(), v) for p, v in FILES.items()):
        m.update(path)
        m.update(hashlib.sha256(data).digest() if lfs else bytes.fromhex(git_blob(data)))
    return "sha256-" + m.hexdigest()

def verify(case):
    argv = [sys.executable, "-m", "trlstack", "verify", "--root", str(ROOT), "--only", "kernels"]
    done = subprocess.run(argv, capture_output=True, text=True)
    print(case, done.returncode)
    print(done.stdout + done.stderr)

folder = make_cache()
variants = {VARIANT: {"hash": lock_hash(), "hash_type": "git_lfs_concat"}}
lock = [{"repo_id": REPO, "sha": SHA, "variants": variants}]
(CACHE / "kernels.lock").write_text(json.dumps(lock, indent=2))
verify("locked")

blob = next(p for p in (folder / "blobs").iterdir() if len(p.name) == 64)
blob.write_bytes(blob.read_bytes()[:-1] + b"\x01")
verify("tampered")
shutil.rmtree(CACHE)

make_cache()
make_cache(sha="2" * 40)
(CACHE / "kernels.lock").write_text(json.dumps(lock))
verify("unlocked-revision")

(CACHE / "kernels.lock").write_text(json.dumps(lock + [dict(lock[0], repo_id="trlstack-test-double/other")]))
verify("missing")
shutil.rmtree(CACHE)

folder = make_cache()
(folder / "refs" / "v3").write_text("3" * 40)
(CACHE / "kernels.lock").write_text(json.dumps(lock))
verify("stale-ref")
"""


def test_kernel_cache_must_equal_its_lock(trlstack_image: str) -> None:
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-e",
            "HF_HUB_OFFLINE=1",
            "--entrypoint",
            "python",
            trlstack_image,
            "-c",
            SCRIPT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cases = dict(part.split("\n", 1) for part in done.stdout.split("\n\n") if part.strip())
    assert cases["locked 0"].startswith("trlstack verify: kernel cache matches"), done.stdout
    repo = "trlstack-test-double/attention@" + "1" * 40
    assert (
        f"kernels: {repo} torch211-cxx11-cu130-x86_64-linux: Lock file specifies kernel"
        in cases["tampered 1"]
    )
    assert (
        f"kernels: trlstack-test-double/attention@{'2' * 40}: cached revision" in cases["unlocked-revision 1"]
    )
    assert (
        "trlstack-test-double/other@" in cases["missing 1"]
        and "locked but not in the cache" in cases["missing 1"]
    )
    assert (
        f"kernels: trlstack-test-double/attention refs/v3: names {'3' * 40}, not the locked commit"
        in cases["stale-ref 1"]
    )
