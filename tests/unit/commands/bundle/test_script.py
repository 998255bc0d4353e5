"""trlstack.commands.bundle.script: install.sh for each format, filled in with the bundle's target."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from trlstack.commands.bundle.script import FORMATS, render_install_script


@pytest.mark.parametrize("fmt", FORMATS)
def test_install_scripts_are_valid_sh(fmt, tmp_path):
    script = tmp_path / "install.sh"
    script.write_text(render_install_script(fmt, "3.12", "manylinux_2_34_x86_64"))
    subprocess.run(["sh", "-n", str(script)], check=True)


def test_the_script_names_the_bundles_format_and_target():
    text = render_install_script("site", "3.12.4", "manylinux_2_34_x86_64")
    assert "--format site, CPython 3.12, manylinux_2_34_x86_64)" in text.splitlines()[1]
    assert "\nformat=site\nshort=3.12\n" in text and not re.search("@[A-Z]+@", text)


def test_an_unknown_format_has_no_script():
    with pytest.raises(ValueError, match="zip"):
        render_install_script("zip", "3.12", "manylinux_2_34_x86_64")


def install(tmp_path, python_version, python):
    script = tmp_path / "install.sh"
    script.write_text(render_install_script("wheelhouse", python_version, "manylinux_2_34_x86_64"))
    return subprocess.run(["sh", str(script)], env={"PYTHON": python}, capture_output=True, text=True)


def test_the_script_refuses_another_python_by_name(tmp_path):
    done = install(tmp_path, "3.99", sys.executable)
    have = "{}.{}".format(*sys.version_info[:2])
    assert done.returncode == 1
    assert f"the bundle is for Python 3.99, {sys.executable} is {have}; set PYTHON=/path/to/python3.99" in (
        done.stderr
    )
    done = install(tmp_path, "3.12", str(tmp_path / "python3.12"))
    assert done.returncode == 1 and "no " + str(tmp_path / "python3.12") + " found" in done.stderr


def test_the_folders_a_pth_file_names_reach_pythonpath(tmp_path):
    """A site folder on PYTHONPATH has its .pth files ignored by Python: activate lists their folders itself
    (nvidia-cutlass-dsl's `cutlass` is found only so)."""
    import hashlib
    import tarfile

    site = tmp_path / "site-src"
    (site / "dsl" / "python_packages" / "cutlass_like").mkdir(parents=True)
    (site / "dsl" / "python_packages" / "cutlass_like" / "__init__.py").write_text("NAME = 'found'\n")
    (site / "dsl.pth").write_text("dsl/python_packages\n")
    (site / "shim.pth").write_text("import os; os.environ.get('X')\n")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    with tarfile.open(bundle / "site.tar.xz", "w:xz") as tar:
        tar.add(site, arcname=".")
    digest = hashlib.sha256((bundle / "site.tar.xz").read_bytes()).hexdigest()
    (bundle / "site.sha256").write_text(digest + "\n")
    (bundle / "bundle.env").write_text("# none\n")
    version = "{}.{}".format(*sys.version_info[:2])
    (bundle / "install.sh").write_text(render_install_script("site", version, "manylinux_2_34_x86_64"))
    dest = tmp_path / "dest"
    env = {"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}
    subprocess.run(["sh", str(bundle / "install.sh"), str(dest)], check=True, env=env, capture_output=True)
    probe = f". {dest}/activate && {sys.executable} -c 'import cutlass_like; print(cutlass_like.NAME)'"
    done = subprocess.run(["sh", "-c", probe], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "found", done.stderr
    assert f"{dest}/dsl/python_packages" in (dest / "activate").read_text()
