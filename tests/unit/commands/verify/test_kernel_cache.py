"""trlstack.commands.verify.kernel_cache where there is no lock to check (the cache against a lock is
checked in the image, which holds the `kernels` library: tests/image/test_kernels_lock.py)."""

from __future__ import annotations

from pathlib import Path

from trlstack.commands.verify.kernel_cache import check_kernels
from trlstack.commands.verify.layout import KERNELS
from trlstack.commands.verify.report import Report


def check(root: Path | None) -> Report:
    report = Report()
    check_kernels(root, report)
    return report


def test_an_archive_has_no_kernel_cache_to_check() -> None:
    report = check(None)
    assert report.findings == []
    assert report.facts == ["kernel cache: checked only on a file system (inside the container or --root)"]


def test_an_empty_cache_is_an_image_built_without_one(tmp_path: Path) -> None:
    (tmp_path / KERNELS).mkdir(parents=True)
    report = check(tmp_path)
    assert report.findings == []
    assert report.facts == ["kernel cache: empty (the build baked no Hub kernels)"]


def test_kernels_without_a_lock_are_a_difference(tmp_path: Path) -> None:
    (tmp_path / KERNELS / "kernels--kernels-community--flash-attn").mkdir(parents=True)
    assert [str(f) for f in check(tmp_path).findings] == [
        f"kernels: /{KERNELS}: holds ['kernels--kernels-community--flash-attn'] but no kernels.lock"
    ]
