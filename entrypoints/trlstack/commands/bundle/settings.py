"""`trlstack bundle`'s settings, each declared once: its flag, its variable and its help."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

from trlstack.commands.bundle.contents import OPTIONAL
from trlstack.commands.bundle.script import FORMATS
from trlstack.defaults import Env
from trlstack.option_types import one_of
from trlstack.options import flag, repeated, setting, switch

THIS_PYTHON = "{}.{}".format(*sys.version_info[:2])


def parse_size(text: str) -> int:
    """'60M' -> 60_000_000 bytes (K, M, G are powers of 1000; Ki, Mi, Gi of 1024)."""
    match = re.fullmatch(r"(\d+)\s*([KMG]i?)?B?", text.strip(), flags=re.IGNORECASE | re.ASCII)
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 60M or 2Gi")
    unit = (match.group(2) or "").upper()
    scale = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "KI": 2**10, "MI": 2**20, "GI": 2**30}[unit]
    return int(match.group(1)) * scale


_OPTIONAL_HELP = "; ".join(f"{name}: {info.why}" for name, info in OPTIONAL.items())


@dataclass(frozen=True)
class BundleSettings:
    """What `trlstack bundle` makes, and for which target. `dir` (DIR) and `dry_run` (--dry-run) are the
    command's own flags: no variable gives them."""

    dir: str = flag("new folder to write the bundle into", positional=True, metavar="DIR")
    python_version: str = setting(Env.BUNDLE_PYTHON_VERSION, "target Python, e.g. 3.12", THIS_PYTHON)
    platform: str = setting(
        Env.BUNDLE_PLATFORM,
        "target wheel platform: glibc and CPU (glibc 2.34: RHEL 9, Ubuntu 22.04, Debian 12, newer)",
        "manylinux_2_34_x86_64",
    )
    format: str = setting(
        Env.BUNDLE_FORMAT,
        "wheelhouse (wheels + pip), or site (one packed site folder)",
        "wheelhouse",
        one_of(*FORMATS),
    )
    piece_size: int | None = setting(
        Env.BUNDLE_PIECE_SIZE,
        "split site.tar.xz into pieces of at most this size (e.g. 60M)",
        type=parse_size,
    )
    exclude_present: str | None = setting(
        Env.BUNDLE_EXCLUDE_PRESENT,
        "`pip list --format=freeze` of the target (a file): leave out packages it has at the locked version",
    )
    keep_target_versions: bool = switch(
        Env.BUNDLE_KEEP_TARGET_VERSIONS,
        "with --exclude-present: leave out every package the target has, at any version (keeps a curated "
        "environment's own builds, e.g. its torch and numpy, instead of the lock's)",
    )
    without: tuple[str, ...] = repeated(
        Env.BUNDLE_WITHOUT,
        f"leave out a locked package and what only it needs (repeatable). Optional ones: {_OPTIONAL_HELP}",
    )
    slim: bool = switch(Env.BUNDLE_SLIM, "leave out every optional package named under --without")
    extra: tuple[str, ...] = repeated(Env.BUNDLE_EXTRA, "pyproject extras to include", default=("gpu",))
    with_project: bool = switch(Env.BUNDLE_WITH_PROJECT, "add trlstack's own wheel (built with uv build)")
    project: str = setting(Env.BUNDLE_PROJECT, "folder holding pyproject.toml and uv.lock", ".")
    pip: str | None = setting(
        Env.BUNDLE_PIP, "pip command to use", shown="this Python's pip, else pip3 on PATH"
    )
    dry_run: bool = switch(None, "print the requirements the bundle would hold and what stays out")
