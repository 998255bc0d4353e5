"""Fixtures of the train tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def run_dir(tmp_path, clean_env):
    clean_env.chdir(tmp_path)
    return tmp_path
