"""trlstack.commands.bundle.command: `trlstack bundle` as a user types it."""

from __future__ import annotations

import pytest
from trlstack.cli import main

from .conftest import ROOT, needs_uv


@needs_uv
def test_the_command_needs_no_without(tmp_path, capsys):
    """README's bundle command, which names no --without: the option's default is no value given empty."""
    argv = ["bundle", str(tmp_path / "b"), "--project", str(ROOT), "--dry-run", "--python-version", "3.12"]
    assert main(argv + ["--platform", "manylinux_2_39_x86_64"]) == 0
    out = capsys.readouterr().out
    assert "\ntorch==" in out and not (tmp_path / "b").exists()
    assert main(argv + ["--without="]) == 1
    assert "--without needs a package name" in capsys.readouterr().err


def test_help_names_each_setting_with_its_variable(capsys, clean_env):
    with pytest.raises(SystemExit) as exit:
        main(["bundle", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exit.value.code == 0 and text.startswith("usage: trlstack bundle ")
    assert "pyproject extras to include [env TRLSTACK_BUNDLE_EXTRA, comma-separated; default: gpu]" in text
    assert "[env TRLSTACK_BUNDLE_PLATFORM; default: manylinux_2_34_x86_64]" in text
    assert "DIR new folder to write the bundle into" in text and "--dry-run" in text


def test_a_bad_variable_is_named_before_anything_runs(tmp_path, capsys, clean_env, no_exec):
    clean_env.setenv("TRLSTACK_BUNDLE_FORMAT", "zip")
    assert main(["bundle", str(tmp_path / "b")]) == 1
    assert "TRLSTACK_BUNDLE_FORMAT='zip' is not valid for --format" in capsys.readouterr().err
