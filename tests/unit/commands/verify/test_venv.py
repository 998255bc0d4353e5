"""trlstack.commands.verify.venv: each changed, missing or extra file of the venv is found and named, with
the package it belongs to; what slim.sh changed is known by definition; where two wheels install one path,
the build's order decides."""

from __future__ import annotations

import hashlib
from pathlib import Path

from trlstack.commands.verify.parsers import installed_dists, locked_dependencies
from trlstack.commands.verify.report import Report
from trlstack.commands.verify.trees import DirTree
from trlstack.commands.verify.venv import check_files

from .built_image import SITE, findings, lock_text, write_dist


def test_one_changed_byte_names_the_package_and_the_file(image: Path) -> None:
    target = image / SITE / "demo/__init__.py"
    target.write_bytes(b"VALUE = 2\n")
    found = findings(image)
    assert f"python: demo /{SITE}/demo/__init__.py: sha256 differs from demo's RECORD" in found
    assert (
        f"python: /{SITE}/demo/__pycache__/__init__.cpython-313.pyc: compiled from a different __init__.py"
        in (found)
    )


def test_a_rewritten_record_is_caught_by_the_sbom(image: Path) -> None:
    record = image / SITE / "demo-1.0.dist-info/RECORD"
    record.write_text(record.read_text().replace("demo/lib.a,", "demo/other.a,"))
    assert (
        f"python: demo: /{SITE}/demo-1.0.dist-info/RECORD differs from the one the build recorded"
        in findings(image)
    )


def test_slim_changes_are_known_by_definition(image: Path) -> None:
    (image / SITE / "demo/lib.a").write_bytes(b"archive")
    (image / SITE / "demo/lib.so").write_bytes(b"ELF with debug")
    assert sorted(findings(image)) == [
        f"python: demo /{SITE}/demo/lib.a: present, but docker/slim.sh removed it at build time",
        f"python: demo /{SITE}/demo/lib.so: differs from the stripped file slim.sh recorded",
    ]


def test_an_excluded_package_that_is_installed_is_a_difference(image: Path) -> None:
    write_dist(image / SITE, "gone", "2.0", {"gone.py": b""})
    assert "python: gone: installed (2.0) but left out by excluded-packages.txt" in findings(image)


def test_files_from_no_wheel_are_differences(image: Path) -> None:
    (image / SITE / "sitecustomize.py").write_text("import os\n")
    (image / SITE / "_virtualenv.py").write_text("# changed\n")
    assert sorted(findings(image)) == [
        f"python: /{SITE}/_virtualenv.py: differs from the venv file the SBOM lists",
        f"python: /{SITE}/sitecustomize.py: in site-packages but in no RECORD and not in the SBOM",
    ]


def test_a_path_two_wheels_install_or_a_wrong_record_is_judged_by_the_build(tmp_path: Path) -> None:
    site = tmp_path / SITE
    write_dist(site, "first", "1.0", {"shared/mod.py": b"first\n", "first/lib.so": b"as the wheel ships it"})
    write_dist(site, "second", "1.0", {"shared/mod.py": b"second\n"})  # installed last: its bytes stay
    (site / "first/lib.so").write_bytes(b"the wheel's RECORD is wrong")  # the SBOM records what was installed
    tree = DirTree(tmp_path)
    dists = installed_dists(tree, SITE)
    known = {
        "lib/python3.13/site-packages/first/lib.so": hashlib.sha256(
            b"the wheel's RECORD is wrong"
        ).hexdigest()
    }

    def check() -> list[str]:
        report = Report()
        check_files(tree, SITE, dists, {}, known, report)
        return [str(f) for f in report.findings]

    assert check() == []
    (site / "first/lib.so").write_bytes(b"tampered")
    (site / "shared/mod.py").write_bytes(b"third\n")
    assert check() == [
        f"python: first /{SITE}/first/lib.so: differs from its RECORD and from the file the SBOM lists",
        f"python: first second /{SITE}/shared/mod.py: sha256 differs from first second's RECORD",
    ]


def test_where_one_wheel_overlays_another_its_copy_must_be_the_one_installed(tmp_path: Path) -> None:
    site = tmp_path / SITE
    write_dist(site, "base", "1.0", {"shared/lib.so": b"generic build\n"})
    write_dist(site, "cu13", "1.0", {"shared/lib.so": b"CUDA 13 build\n"})
    tree = DirTree(tmp_path)
    dists = installed_dists(tree, SITE)
    lock = lock_text({"base": [], "cu13": ["base"], "front": ["base"]}, extras={"front": ["cu13"]})
    needs = locked_dependencies(lock)
    assert needs == {"base": set(), "cu13": {"base"}, "front": {"base", "cu13"}}

    def check(needs: dict[str, set[str]]) -> list[str]:
        report = Report()
        check_files(tree, SITE, dists, {}, {}, report, needs)
        return [str(f) for f in report.findings]

    assert check(needs) == []  # write_dist installed cu13 last: its bytes stay
    (site / "shared/lib.so").write_bytes(b"generic build\n")  # base written last, as a warm cache's order can
    assert check(needs) == [
        f"python: base cu13 /{SITE}/shared/lib.so: "
        "holds base's copy, not that of cu13, which needs and overlays it"
    ]
    assert check({}) == []  # neither needs the other: either copy is one a wheel ships
