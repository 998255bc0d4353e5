"""trlstack.commands.bundle.tools: the programs the bundle is made with, named when missing."""

from __future__ import annotations

import os
import subprocess

import pytest
from trlstack.commands.bundle.tools import call, export, pack
from trlstack.errors import UsageError

from .conftest import ROOT


def test_missing_uv_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="uv is missing"):
        export(ROOT, ["gpu"], [])


def test_pack_splits_the_archive_into_pieces_that_join_back(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "data.bin").write_bytes(os.urandom(50_000))  # random: xz cannot make it smaller than a piece
    pieces = pack(site, tmp_path / "site.tar.xz", 20_000)
    assert [p.name for p in pieces] == ["site.tar.xz.000", "site.tar.xz.001", "site.tar.xz.002"]
    assert not (tmp_path / "site.tar.xz").exists()
    joined = b"".join(p.read_bytes() for p in pieces)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    subprocess.run(["tar", "-xJ", "-C", str(unpacked)], input=joined, check=True)
    assert (unpacked / "data.bin").read_bytes() == (site / "data.bin").read_bytes()


def test_a_program_that_cannot_run_is_named(tmp_path):
    with pytest.raises(UsageError, match=r"pip download: cannot run .*nothing \(No such file"):
        call([str(tmp_path / "nothing"), "download"], "pip download")
