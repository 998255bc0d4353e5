"""Files users keep are written whole or not at all, and keep the mode the user gave them."""

from __future__ import annotations

import os

import pytest
from trlstack import files
from trlstack.files import cannot_create_in, write_atomically


def test_a_new_file_follows_the_umask(tmp_path):
    umask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "plan.json", "{}\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "plan.json").read_text() == "{}\n"
    assert (tmp_path / "plan.json").stat().st_mode & 0o777 == 0o640


def test_a_replaced_file_keeps_its_mode(tmp_path):
    target = tmp_path / ".env"
    target.write_text("HF_TOKEN=hf_secret\n")
    target.chmod(0o600)
    write_atomically(target, "HF_TOKEN=hf_other\n")
    assert target.read_text() == "HF_TOKEN=hf_other\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [path.name for path in tmp_path.iterdir()] == [".env"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "config.yaml"
    target.write_text("old\n")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, "new\n")
    assert target.read_text() == "old\n"
    assert [path.name for path in tmp_path.iterdir()] == ["config.yaml"]


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc on this system")


def test_a_folder_that_takes_new_files_has_no_problem_and_keeps_nothing_of_the_probe(tmp_path):
    assert cannot_create_in(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


@needs_proc
def test_a_pseudo_file_system_takes_nothing_whatever_its_permission_bits_say():
    assert cannot_create_in("/proc")
