"""Small image file systems as docker/build.sh leaves them, for the tests of trlstack.commands.verify: a
distribution written as a wheel installs it, uv.lock's text, and what verify finds on a file system."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from pathlib import Path

from trlstack.commands.verify.areas import AREAS, verify_tree
from trlstack.commands.verify.trees import DirTree

REPO = Path(__file__).resolve().parents[4]
SITE = "opt/trlstack/venv/lib/python3.13/site-packages"
WHEEL_URL = "https://files.example/demo-1.0-py3-none-any.whl"
DPKG = """Package: tini
Status: install ok installed
Architecture: amd64
Version: 0.19.0-3

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
"""


def load_sbom_module():
    """docker/sbom.py, the build's own SBOM writer (a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("trlstack_image_sbom", REPO / "docker" / "sbom.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def b64(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_dist(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A wheel-installed distribution: its files, METADATA, WHEEL and a RECORD with every hash."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-any\n")
    rows = []
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
        rows.append(f"{relative},{b64(data)},{len(data)}")
    for meta in ("METADATA", "WHEEL"):
        rows.append(f"{info.name}/{meta},{b64((info / meta).read_bytes())},")
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def findings(root: Path, **expect: str) -> list[str]:
    """Every difference verify finds on the file system at `root`, as printed; `expect`: label -> sha256."""
    return [str(f) for f in verify_tree(DirTree(root), AREAS, expect).findings]


def lock_text(needs: dict[str, list[str]], extras: dict[str, list[str]] | None = None) -> str:
    """A uv.lock of packages at version 1.0 with these dependencies (and each one's extra `cu13`)."""
    blocks = []
    for name, deps in needs.items():
        block = f'[[package]]\nname = "{name}"\nversion = "1.0"\n'
        block += "dependencies = [" + ", ".join(f'{{ name = "{d}" }}' for d in deps) + "]\n"
        if extras and name in extras:
            block += "\n[package.optional-dependencies]\ncu13 = ["
            block += ", ".join(f'{{ name = "{d}" }}' for d in extras[name]) + "]\n"
        blocks.append(block)
    return "\n".join(blocks)
