"""The parts of an image verify checks, and the run of the chosen ones over one file system."""

from __future__ import annotations

from collections.abc import Iterable

from trlstack.commands.verify.debian import check_debian
from trlstack.commands.verify.kernel_cache import check_kernels
from trlstack.commands.verify.provenance import load_provenance
from trlstack.commands.verify.report import Report
from trlstack.commands.verify.trees import Tree
from trlstack.commands.verify.venv import check_python

AREAS = ("provenance", "python", "debian", "kernels")


def verify_tree(tree: Tree, areas: Iterable[str], expect: dict[str, str]) -> Report:
    """The report on the chosen `areas` of one file system; `expect`: label -> the sha256 it gives, where
    known. Python and Debian are checked against the provenance, so they need it (and check it) too."""
    report = Report()
    areas = set(areas)
    if areas & {"provenance", "python", "debian"}:
        provenance = load_provenance(tree, report, expect)
        if provenance is not None:
            if "python" in areas:
                check_python(tree, provenance, report)
            if "debian" in areas:
                check_debian(tree, provenance, report)
    if "kernels" in areas:
        check_kernels(tree.local_root, report)
    return report
