"""trlstack.commands.verify.areas: every part of an image as the build makes it verifies."""

from __future__ import annotations

from pathlib import Path

from trlstack.commands.verify.areas import AREAS, verify_tree
from trlstack.commands.verify.trees import DirTree


def test_an_image_as_built_verifies(image: Path) -> None:
    report = verify_tree(DirTree(image), AREAS, {})
    assert report.findings == []
    assert any("2 Python distributions" in fact and "1 packages left out" in fact for fact in report.facts)
    assert any("1 Debian packages match" in fact for fact in report.facts)
