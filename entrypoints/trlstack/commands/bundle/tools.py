"""The programs the bundle is made with: uv (export, build, pip install --target), pip, tar and xz."""

from __future__ import annotations

import hashlib
import importlib.util
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from trlstack.commands.bundle.contents import Pin, parse_export
from trlstack.commands.bundle.target import platform_tags, python_tag, uv_platform
from trlstack.errors import UsageError


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise UsageError("uv is missing: install it (python3 -m pip install uv) and run again")
    return uv


def pip(explicit: str | None) -> list[str]:
    if explicit:
        return shlex.split(explicit)
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        if found := shutil.which(name):
            return [found]
    raise UsageError(
        "pip is missing: install it (python3 -m ensurepip, or apt-get install python3-pip) or pass --pip"
    )


def call(argv: Sequence[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    print("+ " + shlex.join(argv), file=sys.stderr)
    try:
        return subprocess.run(argv, check=True, **kwargs)
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or "").strip() if isinstance(error.stderr, str) else ""
        raise UsageError(
            f"{what} failed (exit {error.returncode}){': ' + detail if detail else ''}"
        ) from None
    except OSError as error:  # the program itself: a --pip that names nothing runnable
        raise UsageError(f"{what}: cannot run {argv[0]} ({error.strerror}); check the command") from None


def export(project: Path, extras: Sequence[str], prune: Sequence[str]) -> list[Pin]:
    # No dependency group (dev, lint): the target runs the stack, not the tests.
    argv = [_uv(), "export", "--frozen", "--format", "requirements.txt", "--no-default-groups"]
    argv += ["--no-emit-project", "--no-header", "--no-annotate"]
    argv += [arg for extra in extras for arg in ("--extra", extra)]
    argv += [arg for name in prune for arg in ("--prune", name)]
    done = call(argv, "uv export", cwd=project, capture_output=True, text=True)
    return parse_export(done.stdout)


def target_flags(python_version: str, platform: str) -> list[str]:
    flags = [
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python_tag(python_version)[0],
    ]
    return flags + [arg for tag in platform_tags(platform) for arg in ("--platform", tag)]


def build_project_wheel(project: Path, into: Path) -> Pin:
    """trlstack's own wheel (uv build), pinned by its sha256 like the locked ones."""
    call([_uv(), "build", "--wheel", "--out-dir", str(into), str(project)], "uv build --wheel")
    (wheel,) = sorted(into.glob("*.whl"))
    name, version = wheel.name.split("-")[:2]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return Pin(canonicalize_name(name), version, "", (f"sha256:{digest}",))


def pack(site: Path, archive: Path, piece_size: int | None) -> list[Path]:
    """tar.xz of `site` (xz on every core), split into archive.000, .001, ... when piece_size is given."""
    for tool in ("tar", "xz"):
        if shutil.which(tool) is None:
            raise UsageError(
                f"{tool} is missing: install it (apt-get install {tool}) or use --format wheelhouse"
            )
    with archive.open("wb") as out:
        tar = subprocess.Popen(["tar", "-C", str(site), "-cf", "-", "."], stdout=subprocess.PIPE)
        xz = subprocess.run(["xz", "-T0", "-6", "-c"], stdin=tar.stdout, stdout=out)
        if tar.stdout is not None:
            tar.stdout.close()
        if tar.wait() != 0 or xz.returncode != 0:
            raise UsageError("packing the site folder failed (tar/xz); is the disk full?")
    if piece_size is None or archive.stat().st_size <= piece_size:
        return [archive]
    pieces: list[Path] = []
    with archive.open("rb") as whole:
        while chunk := whole.read(piece_size):
            piece = archive.with_name(f"{archive.name}.{len(pieces):03d}")
            piece.write_bytes(chunk)
            pieces.append(piece)
    archive.unlink()
    return pieces


def install_site(site: Path, requirements: Path, wheels: Path, python_version: str, platform: str) -> None:
    """The requirements installed into `site` for the target, by uv from the index (wheels only, each hash
    checked); trlstack's own wheel, when added, comes from `wheels`."""
    argv = [_uv(), "pip", "install", "--target", str(site), "--no-deps", "--no-build", "--require-hashes"]
    argv += ["--python-platform", uv_platform(platform), "--python-version", python_tag(python_version)[0]]
    argv += ["--find-links", str(wheels), "-r", str(requirements)]
    call(argv, "uv pip install --target", stderr=subprocess.PIPE, text=True)
    (site / ".lock").unlink(missing_ok=True)  # uv's lock of the folder, not part of the site


def sha256(pieces: Sequence[Path]) -> str:
    """The sha256 of the pieces joined in order: what install.sh checks before unpacking."""
    digest = hashlib.sha256()
    for piece in pieces:
        with piece.open("rb") as data:
            while chunk := data.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()
