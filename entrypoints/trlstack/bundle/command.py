"""`trlstack bundle`'s command line."""

from __future__ import annotations

import argparse
import os
import re
import sys

from trlstack.bundle.build import make_bundle
from trlstack.bundle.contents import OPTIONAL
from trlstack.bundle.script import FORMATS


def parse_size(text: str) -> int:
    """'60M' -> 60_000_000 bytes (K, M, G are powers of 1000; Ki, Mi, Gi of 1024)."""
    match = re.fullmatch(r"(\d+)\s*([KMG]i?)?B?", text.strip(), flags=re.IGNORECASE)
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 60M or 2Gi")
    unit = (match.group(2) or "").upper()
    scale = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "KI": 2**10, "MI": 2**20, "GI": 2**30}[unit]
    return int(match.group(1)) * scale


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Make an offline install of the locked GPU stack (uv.lock) for a machine without a package index: "
        "a wheelhouse, or a packed site folder, plus install.sh for the target."
    )
    optional = "; ".join(f"{name}: {info.why}" for name, info in OPTIONAL.items())
    parser.add_argument("dir", metavar="DIR", help="new folder to write the bundle into")
    parser.add_argument(
        "--python-version", default="{}.{}".format(*sys.version_info[:2]), help="target Python, e.g. 3.12"
    )
    parser.add_argument(
        "--platform",
        default="manylinux_2_34_x86_64",
        help="target wheel platform: glibc and CPU (glibc 2.34: RHEL 9, Ubuntu 22.04, Debian 12, newer)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="wheelhouse", help="wheels + pip, or one packed site folder"
    )
    parser.add_argument(
        "--piece-size", type=parse_size, help="split site.tar.xz into pieces of at most this size (e.g. 60M)"
    )
    parser.add_argument(
        "--exclude-present",
        metavar="FILE",
        help="`pip list --format=freeze` of the target: leave out packages it has at the locked version",
    )
    parser.add_argument(
        "--keep-target-versions",
        action="store_true",
        help="with --exclude-present: leave out every package the target has, at any version (keeps a "
        "curated environment's own builds, e.g. its torch and numpy, instead of the lock's)",
    )
    parser.add_argument(
        "--without",
        metavar="NAME",
        action="append",
        default=[],
        help=f"leave out a locked package and what only it needs (repeatable). Optional ones: {optional}",
    )
    parser.add_argument(
        "--slim", action="store_true", help="leave out every optional package named under --without"
    )
    parser.add_argument(
        "--extra", action="append", default=None, help="pyproject extras to include (default: gpu)"
    )
    parser.add_argument(
        "--with-project", action="store_true", help="add trlstack's own wheel (built with uv build)"
    )
    parser.add_argument(
        "--project", default=".", help="folder holding pyproject.toml and uv.lock (default: .)"
    )
    parser.add_argument("--pip", help="pip command to use (default: this Python's pip, else pip3 on PATH)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requirements the bundle would hold and what stays out",
    )


def run(args: argparse.Namespace) -> int:
    args.extra = args.extra or ["gpu"]
    out = make_bundle(args)
    if not args.dry_run:
        print(
            f"bundle: wrote {out}; on the target run: sh {os.path.join(out.name, 'install.sh')}",
            file=sys.stderr,
        )
    return 0
