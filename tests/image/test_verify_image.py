"""`trlstack verify` against the built image: one changed byte in an installed package is found and named,
through `trlstack verify --image` (a throwaway container, the image's labels checked too)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.docker

# A file of a locked wheel that every role imports.
TARGET = "/opt/trlstack/venv/lib/python3.13/site-packages/trl/__init__.py"


def test_one_changed_byte_fails_verify_naming_package_and_file(trlstack_image: str) -> None:
    container = f"trlstack-tamper-{uuid.uuid4().hex[:8]}"
    tampered = f"trlstack-tampered:{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [
            "docker",
            "run",
            "--name",
            container,
            "--user",
            "0",
            "--network",
            "none",
            "--entrypoint",
            "python",
            trlstack_image,
            "-c",
            f"p = {TARGET!r}; b = bytearray(open(p, 'rb').read()); b[0] ^= 1; open(p, 'wb').write(b)",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(["docker", "commit", container, tampered], check=True, capture_output=True)
        done = subprocess.run(
            [sys.executable, "-m", "trlstack", "verify", "--image", tampered, "--only", "python"],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        subprocess.run(["docker", "image", "rm", "-f", tampered], capture_output=True)
    print(done.stdout, done.stderr)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"trlstack verify: python: trl {TARGET}: sha256 differs from trl's RECORD" in done.stdout
    assert "__init__.cpython-313.pyc: compiled from a different __init__.py" in done.stdout
