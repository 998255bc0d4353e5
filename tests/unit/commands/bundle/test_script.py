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
