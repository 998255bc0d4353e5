"""The image build bakes the Kernels Hub kernels docker/kernels/pyproject.toml lists: without a committed
kernels.lock it locks them (the current commit of each listed version, as `kernels lock` does), bakes this
image's build variant, keeps the lock in the image and in the SBOM and prints it to commit; with a committed
lock it bakes exactly what the lock pins; where the Hub cannot be reached it bakes none, says so in one line,
and succeeds (WITH_KERNEL_CACHE=auto, the default) or fails (WITH_KERNEL_CACHE=1).

The Hub is the test double: tests/image/kernel_hub.py, in a container of the image on Docker's default bridge
network, where the build's RUN steps reach it (HF_ENDPOINT); the build itself runs as users run it, with
docker/build.sh, from a copy of the build context (so docker/kernels/ can hold a lock without touching the
checkout)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

# The build variant `kernels` picks for the image's torch (2.11.0+cu130, C++11 ABI) on x86_64 Linux, and one
# it must leave out (another torch and CUDA): the lock names both, the image holds the first.
VARIANT = "torch211-cxx11-cu130-x86_64-linux"
OTHER = "torch210-cxx11-cu128-x86_64-linux"
KERNELS = {
    "kernels-community/flash-attn2": "v3",
    "kernels-community/flash-attn3": "v1",
}  # pyproject's versions
CONTEXT = [
    "pyproject.toml",
    "uv.lock",
    "README.md",
    ".dockerignore",
    "entrypoints",
    "docker",
]  # .dockerignore's
UNREACHABLE = "http://127.0.0.1:9"  # the build step's own loopback: nothing listens there
REPO = Path(__file__).resolve().parents[2]


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_files(repo: str, mark: str) -> dict[str, bytes]:
    """A kernel repository's files at one commit: a tiny build of two variants (an LFS shared library)."""
    files = {"README.md": f"{repo} {mark}\n".encode()}
    for variant in (VARIANT, OTHER):
        files[f"build/{variant}/metadata.json"] = b'{"python-depends": []}\n'
        files[f"build/{variant}/flash_attn/__init__.py"] = f"MARK = {mark!r}\n".encode()
        files[f"build/{variant}/flash_attn/_flash_attn.abi3.so"] = (
            b"\x7fELF" + f"{repo} {variant} {mark}".encode()
        )
    return files


def variant_hash(files: dict[str, bytes], variant: str) -> str:
    """What `kernels lock` records for a variant: sha256 over its sorted (path, Git blob or LFS id) pairs."""
    prefix = f"build/{variant}/"
    digest = hashlib.sha256()
    for path, data in sorted(
        (p[len(prefix) :].encode(), d) for p, d in files.items() if p.startswith(prefix)
    ):
        digest.update(path)
        digest.update(
            hashlib.sha256(data).digest() if path.endswith(b".so") else bytes.fromhex(git_blob(data))
        )
    return "sha256-" + digest.hexdigest()


@dataclass
class Hub:
    url: str
    root: Path
    commits: dict[str, dict[str, bytes]]  # commit -> files

    def publish(self, repo: str, branch: str, mark: str) -> str:
        """A new commit of `repo` at the tip of `branch` (and main); its sha."""
        files = commit_files(repo, mark)
        sha = hashlib.sha1(f"{repo} {mark}".encode()).hexdigest()
        for path, data in files.items():
            (self.root / repo / sha / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / repo / sha / path).write_bytes(data)
        (self.root / repo / "branches.json").write_text(json.dumps({"main": sha, branch: sha}))
        self.commits[sha] = files
        return sha


@pytest.fixture(scope="module")
def hub(trlstack_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """The stand-in Hub serving both kernels at a first commit, in a container that publishes no port."""
    root = tmp_path_factory.mktemp("hub")
    name = f"trlstack-test-kernel-hub-{os.getpid()}"
    server = Path(__file__).with_name("kernel_hub.py")
    subprocess.run(
        ["docker", "run", "-d", "--rm", "--name", name, "--user", f"{os.getuid()}:{os.getgid()}"]
        + ["-v", f"{root}:/hub:ro", "-v", f"{server}:/kernel_hub.py:ro", "--entrypoint", "python"]
        + [trlstack_image, "/kernel_hub.py", "/hub", "8080"],
        check=True,
        capture_output=True,
    )
    try:
        address = subprocess.run(
            ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        stand_in = Hub(f"http://{address}:8080", root, {})
        for repo, branch in KERNELS.items():
            stand_in.publish(repo, branch, "first")
        wait_for(f"{stand_in.url}/api/kernels/kernels-community/flash-attn2/refs")
        yield stand_in
    finally:
        logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
        print(logs.stdout + logs.stderr)  # shown with a failure: what the build asked the Hub
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def wait_for(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the build context, without a committed kernels.lock."""
    copy = tmp_path_factory.mktemp("context")
    for name in CONTEXT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, copy / name)
    (copy / "docker/kernels/kernels.lock").unlink(missing_ok=True)
    return copy


@dataclass
class Builds:
    """docker/build.sh runs in the copied context; the images they tag are removed after the module."""

    context: Path
    settings: dict[str, str]
    tags: list[str]

    def __call__(self, tag: str, log: Path, **env: str) -> tuple[int, str]:
        """Build, tagging `tag`, with these variables (WITH_KERNEL_CACHE unset: the default); the exit code
        and the output (also in `log`)."""
        settings = {**self.settings, **env}
        if "WITH_KERNEL_CACHE" not in env:
            settings.pop("WITH_KERNEL_CACHE", None)
        argv = ["bash", "docker/build.sh", "--progress=plain", "--set", f"trlstack.tags={tag}"]
        done = subprocess.run(
            argv, cwd=self.context, env=settings, capture_output=True, text=True, timeout=1800
        )
        log.write_text(done.stdout + done.stderr)
        self.tags.append(tag)
        return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def build(context: Path, build_settings: Callable[[], dict[str, str]]) -> Iterator[Builds]:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    epoch = subprocess.run(
        ["git", "log", "-1", "--format=%ct", commit, "--", "uv.lock"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The checkout's commit and time (build.sh asks git, and the copy is no git checkout): the same layers.
    builds = Builds(context, {**build_settings(), "GIT_COMMIT": commit, "SOURCE_DATE_EPOCH": epoch}, [])
    yield builds
    if builds.tags:
        subprocess.run(["docker", "image", "rm", *builds.tags], capture_output=True)


def in_image(tag: str, *argv: str, env: tuple[str, ...] = ()) -> str:
    options = [item for name in env for item in ("-e", name)]
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", *options, "--entrypoint", argv[0], tag, *argv[1:]],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def image_id(tag: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True, check=True
    ).stdout.strip()


def label(tag: str, name: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{name}"}}}}', tag],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


# Offline, as a training run with HF_HUB_OFFLINE=1 loads it: the version transformers asks for resolves to the
# locked commit through the cache's refs, and `kernels` finds this image's variant there; policy agrees.
OFFLINE_LOAD = """
import json, os
from kernels._versions import select_revision_or_version
from kernels.utils import install_kernel
from trlstack.policy import hub_kernel_unavailable
found = {}
for repo, version in (("kernels-community/flash-attn2", 3), ("kernels-community/flash-attn3", 1)):
    sha = select_revision_or_version(repo, revision=None, version=version)
    path = install_kernel(repo, revision=sha, local_files_only=True)
    found[repo] = [sha, os.path.basename(path), hub_kernel_unavailable(repo)]
print(json.dumps(found))
"""


def test_a_build_without_a_lock_locks_bakes_and_prints_it(
    hub: Hub, context: Path, build: Builds, tmp_path: Path
) -> None:
    tag = "trlstack:test-kernels-locked"
    code, output = build(tag, tmp_path / "build.log", HF_ENDPOINT=hub.url)
    assert code == 0, output[-6000:]
    lock = json.loads((context / "dist/sbom/kernels.lock").read_text())
    shas = {
        repo: json.loads((hub.root / repo / "branches.json").read_text())[v] for repo, v in KERNELS.items()
    }
    assert [(entry["repo_id"], entry["sha"]) for entry in lock] == list(shas.items())
    for entry in lock:  # every variant of the commit, hashed as `kernels lock` hashes them
        files = hub.commits[entry["sha"]]
        assert entry["variants"] == {
            v: {"hash": variant_hash(files, v), "hash_type": "git_lfs_concat"} for v in (VARIANT, OTHER)
        }
    # build.sh ends with one line on what was baked, the command that commits the lock, and the lock itself.
    baked = "; ".join(f"{repo}@{sha[:12]} ({VARIANT})" for repo, sha in shas.items())
    tail = output.rstrip("\n").split("\n")
    summary = tail.index(f"kernels: baked {baked}, locked now from docker/kernels/pyproject.toml")
    assert tail[summary + 1].endswith("cp dist/sbom/kernels.lock docker/kernels/kernels.lock")
    assert json.loads("\n".join(tail[summary + 2 :])) == lock

    # The image keeps that lock (taken out as docker/README.md shows) and holds exactly this variant of each.
    shown = subprocess.run(
        ["docker", "run", "--rm", tag, "cat", "/opt/trlstack/kernels/kernels.lock"],
        capture_output=True,
        text=True,
    )
    assert json.loads(shown.stdout) == lock, shown.stderr
    assert label(tag, "org.trlstack.kernel-cache") == "1"
    listed = in_image(tag, "sh", "-c", "cd /opt/trlstack/kernels && ls -d kernels--*/snapshots/*/build/*")
    assert sorted(listed.split()) == sorted(
        f"kernels--{repo.replace('/', '--')}/snapshots/{sha}/build/{VARIANT}" for repo, sha in shas.items()
    )
    sbom = json.loads((context / "dist/sbom/sbom.cdx.json").read_text())
    kernels = [(c["name"], c["version"]) for c in sbom["components"] if c["name"] in KERNELS]
    assert kernels == list(shas.items())
    verify = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "trlstack", tag, "verify"]
        + ["--only", "kernels", "--only", "provenance"],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    loaded = json.loads(
        in_image(tag, "python", "-W", "ignore", "-c", OFFLINE_LOAD, env=("HF_HUB_OFFLINE=1",))
    )
    assert loaded == {repo: [sha, VARIANT, None] for repo, sha in shas.items()}

    # With that lock committed, a later build bakes exactly what it pins, though the Hub has moved on.
    shutil.copy(context / "dist/sbom/kernels.lock", context / "docker/kernels/kernels.lock")
    moved = hub.publish("kernels-community/flash-attn2", "v3", "second")
    tag = "trlstack:test-kernels-pinned"
    code, output = build(tag, tmp_path / "pinned.log", HF_ENDPOINT=hub.url)
    (context / "docker/kernels/kernels.lock").unlink()
    assert code == 0, output[-6000:]
    assert (
        output.rstrip("\n").split("\n")[-1] == f"kernels: baked {baked}, as docker/kernels/kernels.lock pins"
    )
    assert json.loads(in_image(tag, "cat", "/opt/trlstack/kernels/kernels.lock")) == lock
    folder = "/opt/trlstack/kernels/kernels--kernels-community--flash-attn2/snapshots"
    assert in_image(tag, "ls", folder).split() == [shas["kernels-community/flash-attn2"]]
    assert moved != shas["kernels-community/flash-attn2"]
    assert image_id(tag) == image_id("trlstack:test-kernels-locked")  # the same lock bakes the same image

    # Without a committed lock, every build asks the Hub again (a cached answer would be the first lock).
    code, output = build("trlstack:test-kernels-relocked", tmp_path / "relocked.log", HF_ENDPOINT=hub.url)
    assert code == 0, output[-6000:]
    relocked = json.loads((context / "dist/sbom/kernels.lock").read_text())
    assert [entry["sha"] for entry in relocked] == [moved, shas["kernels-community/flash-attn3"]]


def test_a_build_that_cannot_reach_the_hub_bakes_none_and_says_so(build: Builds, tmp_path: Path) -> None:
    tag = "trlstack:test-kernels-offline"
    code, output = build(tag, tmp_path / "auto.log", HF_ENDPOINT=UNREACHABLE)
    assert code == 0, output[-6000:]
    last = output.rstrip("\n").split("\n")[-1]
    assert last.startswith(f"kernels: baked no Hub kernels: {UNREACHABLE} could not be reached (ConnectError")
    assert last.endswith(
        "to bake them, build again where the Hub (or a mirror named by HF_ENDPOINT) is reachable; meanwhile "
        "train loads them from the Hub at run time where it is reachable, else uses sdpa"
    )
    assert output.count("\nkernels: ") == 1  # one line of build.sh's own (the build log prefixes its copy)
    assert label(tag, "org.trlstack.kernel-cache") == "0"
    assert in_image(tag, "ls", "-A", "/opt/trlstack/kernels") == ""

    required = {"HF_ENDPOINT": UNREACHABLE, "WITH_KERNEL_CACHE": "1"}
    code, output = build("trlstack:test-kernels-required", tmp_path / "required.log", **required)
    assert code != 0
    assert f"kernels: WITH_KERNEL_CACHE=1 but {UNREACHABLE} could not be reached" in output
