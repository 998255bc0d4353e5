"""trlstack.bundle.command: `trlstack bundle`'s flags, as a user types them."""

from __future__ import annotations

import argparse

import pytest
from trlstack.bundle.command import parse_size
from trlstack.cli import main

from .conftest import ROOT, needs_uv


@pytest.mark.parametrize(
    ("text", "size"), [("60M", 60_000_000), ("2Gi", 2 * 2**30), ("512k", 512_000), ("7", 7)]
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "60 MB extra", "-5M", "sixty"])
def test_bad_sizes(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)


@needs_uv
def test_the_command_needs_no_without(tmp_path, capsys):
    """README's bundle command, which names no --without: the option's default is no value given empty."""
    argv = ["bundle", str(tmp_path / "b"), "--project", str(ROOT), "--dry-run", "--python-version", "3.12"]
    assert main(argv + ["--platform", "manylinux_2_39_x86_64"]) == 0
    out = capsys.readouterr().out
    assert "\ntorch==" in out and not (tmp_path / "b").exists()
    assert main(argv + ["--without="]) == 1
    assert "--without needs a package name" in capsys.readouterr().err
