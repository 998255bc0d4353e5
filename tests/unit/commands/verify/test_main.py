"""trlstack.commands.verify as the image build runs it, `python -m trlstack.commands.verify`, from the
source tree: it needs nothing but the standard library and checks only a file system."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from trlstack.commands.verify.command import main

ENTRYPOINTS = Path(__file__).resolve().parents[4] / "entrypoints"


def test_it_imports_only_the_standard_library_and_trlstack() -> None:
    code = (
        "import sys; before = set(sys.modules); import trlstack.commands.verify\n"
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)))"
    )
    # -S: no site-packages, only the standard library and the source tree on PYTHONPATH.
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={**os.environ, "PYTHONPATH": str(ENTRYPOINTS)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['trlstack']"


def test_python_m_checks_a_file_system(image: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-m", "trlstack.commands.verify", "--root", str(image), "--only", "python"],
        env={**os.environ, "PYTHONPATH": str(ENTRYPOINTS)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"trlstack verify: {image}: OK" in done.stdout


@pytest.mark.parametrize("where", ["--image", "--tarball"])
def test_standalone_it_refuses_what_is_not_a_file_system(
    where: str, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([where, "somewhere"]) == 1
    assert "standalone, verify checks a file system: use --root" in capsys.readouterr().err
