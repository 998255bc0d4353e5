"""The tiny model the GPU tests run on (gpu_env.py says when they skip, and why)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    """A tiny Qwen2-shaped model (random weights, tokenizer trained here, chat template) and prompts."""
    root = tmp_path_factory.mktemp("tiny")
    subprocess.run([sys.executable, "-m", "trlstack", "tiny", str(root)], check=True)
    return root
