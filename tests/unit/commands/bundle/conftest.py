"""What the bundle tests share: this checkout's lock, a parser for `trlstack bundle`, a target's freeze."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from trlstack.commands.bundle import command
from trlstack.commands.bundle.contents import applies
from trlstack.commands.bundle.target import marker_environment
from trlstack.commands.bundle.tools import export

ROOT = Path(__file__).resolve().parents[4]

needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")


def parse(*argv: str) -> argparse.Namespace:
    """`trlstack bundle ARGV` as the command reads it."""
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(argv)


def everything_but(names: set[str], tmp_path: Path, version: str = "3.12") -> Path:
    """A freeze listing every locked package except `names`, so the bundle holds only those."""
    here = marker_environment(version, "manylinux_2_34_x86_64")
    pins = [pin for pin in export(ROOT, ["gpu"], []) if applies(pin, here)]
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("".join(f"{p.name}=={p.version}\n" for p in pins if p.name not in names))
    return freeze
