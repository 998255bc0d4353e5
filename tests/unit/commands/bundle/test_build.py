"""trlstack.commands.bundle.build: the checks before anything is written, the dry run, and a real offline
install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from trlstack.commands.bundle.command import run
from trlstack.commands.bundle.script import FORMATS
from trlstack.errors import UsageError

from .conftest import ROOT, everything_but, needs_uv, parse


def test_keep_target_versions_needs_the_targets_freeze(tmp_path):
    args = parse(str(tmp_path / "b"), "--project", str(ROOT), "--keep-target-versions")
    with pytest.raises(UsageError, match="--exclude-present"):
        run(args)


def test_missing_uv_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="uv is missing"):
        run(parse(str(tmp_path / "b"), "--project", str(ROOT)))


def test_piece_size_needs_the_site_format(tmp_path):
    args = parse(str(tmp_path / "b"), "--piece-size", "60M", "--project", str(ROOT))
    with pytest.raises(UsageError, match="--format site"):
        run(args)


def test_an_existing_folder_is_left_alone(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        run(parse(str(tmp_path), "--project", str(ROOT)))
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_a_folder_without_a_lock_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no uv.lock"):
        run(parse(str(tmp_path / "b"), "--project", str(tmp_path)))


@needs_uv
def test_dry_run_prints_what_the_target_lacks(tmp_path, capsys):
    freeze = everything_but({"tqdm", "pyyaml"}, tmp_path)
    argv = [str(tmp_path / "b"), "--project", str(ROOT), "--exclude-present", str(freeze)]
    assert run(parse(*argv, "--python-version", "3.12", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert [line.split("==")[0] for line in out.splitlines() if "==" in line] == ["pyyaml", "tqdm"]
    assert not (tmp_path / "b").exists()


def python_with_pip() -> tuple[str, str]:
    """An interpreter that has pip (the test's own venv may not), and its X.Y version."""
    # uv's venvs have no pip; the interpreter they were made from usually has.
    base = os.path.join(sys.base_prefix, "bin", "python3")
    for python in (sys.executable, base, shutil.which("python3")):
        if python and subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            probe = [python, "-c", "import sys; print(*sys.version_info[:2], sep='.')"]
            return python, subprocess.run(probe, capture_output=True, text=True).stdout.strip()
    pytest.skip("no Python with pip here (python3 -m pip fails)")


@needs_uv
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_small_bundle_installs_offline(fmt, tmp_path):
    """Real uv export, pip download from the index and install.sh, for two small pure-Python packages."""
    python, version = python_with_pip()
    freeze = everything_but({"tqdm", "tenacity"}, tmp_path, version)
    out = tmp_path / "bundle"
    argv = [str(out), "--project", str(ROOT), "--exclude-present", str(freeze), "--format", fmt]
    argv += ["--without", "vllm", "--python-version", version, "--pip", f"{python} -m pip"]
    if fmt == "site":
        argv += ["--piece-size", "20K"]
    assert run(parse(*argv)) == 0
    assert "vllm: left out with --without" in (out / "left-out.txt").read_text()
    assert not out.with_name("bundle.partial").exists()
    env = {"PYTHON": python, "PATH": os.environ["PATH"]}
    if fmt == "wheelhouse":
        site = tmp_path / "site"
        subprocess.run(["sh", str(out / "install.sh"), "--target", str(site)], check=True, env=env)
    else:
        assert len(list(out.glob("site.tar.xz.*"))) >= 2  # split into pieces
        site = tmp_path / "dest"
        subprocess.run(["sh", str(out / "install.sh"), str(site)], check=True, env=env)
        activate = (site / "activate").read_text()
        assert f"PYTHONPATH={site}" in activate
        assert "VLLM_USE_FLASHINFER_SAMPLER" not in activate  # vllm itself was left out
    probe = "import tqdm, tenacity; print(tqdm.__file__)"
    done = subprocess.run(
        [python, "-c", probe], env={"PYTHONPATH": str(site)}, capture_output=True, text=True
    )
    assert done.stdout.startswith(str(site)), done.stderr


def test_a_file_in_the_way_is_named(tmp_path):
    (tmp_path / "b").write_text("mine")
    with pytest.raises(UsageError, match="exists and is not a folder"):
        run(parse(str(tmp_path / "b"), "--project", str(ROOT)))
    assert (tmp_path / "b").read_text() == "mine"


@needs_uv
@pytest.mark.parametrize("name", ["missing.txt", "."])
def test_an_unreadable_freeze_is_named(name, tmp_path):
    argv = [str(tmp_path / "b"), "--project", str(ROOT), "--exclude-present", str(tmp_path / name)]
    with pytest.raises(UsageError, match="--exclude-present .*: cannot be read"):
        run(parse(*argv))


@needs_uv
def test_a_folder_that_cannot_be_written_is_named(tmp_path):
    freeze = everything_but(set(), tmp_path)  # nothing to fetch: the first folder made is the failure
    argv = ["/proc/trlstack-bundle", "--project", str(ROOT), "--exclude-present", str(freeze)]
    with pytest.raises(UsageError, match="could not write the bundle into /proc/trlstack-bundle"):
        run(parse(*argv))
