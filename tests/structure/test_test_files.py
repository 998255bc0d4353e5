"""The test files themselves: pytest imports a test file outside a package by its name alone (rootdir import
mode, which tests/gpu's sibling imports need), so two such files of one name stop the whole collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_outside_a_package_has_a_name_of_its_own():
    loose = [path for path in TESTS.rglob("test_*.py") if not (path.parent / "__init__.py").exists()]
    twice = {name: count for name, count in Counter(path.name for path in loose).items() if count > 1}
    assert not twice, f"test files of one name outside a package: {twice}; name them by their folder"
