"""trlstack.bundle.script: install.sh for each format."""

from __future__ import annotations

import subprocess

import pytest
from trlstack.bundle.script import FORMATS, render_install_script


@pytest.mark.parametrize("fmt", FORMATS)
def test_install_scripts_are_valid_sh(fmt, tmp_path):
    script = tmp_path / "install.sh"
    script.write_text(render_install_script(fmt, "3.12", "manylinux_2_34_x86_64"))
    subprocess.run(["sh", "-n", str(script)], check=True)
