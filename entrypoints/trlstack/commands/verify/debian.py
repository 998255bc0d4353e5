"""The Debian packages dpkg lists as installed against the SBOM's."""

from __future__ import annotations

import re

from trlstack.commands.verify.layout import DPKG_STATUS
from trlstack.commands.verify.provenance import Provenance
from trlstack.commands.verify.report import Report
from trlstack.commands.verify.trees import Tree


def dpkg_installed(status: str) -> set[tuple[str, str, str]]:
    """(name, arch, version) of each package dpkg's status file says is installed."""
    packages = set()
    for paragraph in status.strip().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", paragraph, re.M))
        if fields.get("Status") == "install ok installed":
            packages.add((fields["Package"], fields["Architecture"], fields["Version"]))
    return packages


def check_debian(tree: Tree, provenance: Provenance, report: Report) -> None:
    """Both ways: a package installed that the SBOM lacks, and one the SBOM names that is not installed."""
    status = tree.read(DPKG_STATUS)
    if status is None:
        report.add("debian", f"/{DPKG_STATUS}", "missing")
        return
    have, said = dpkg_installed(status.decode("utf-8", "replace")), provenance.sbom.debian
    for name, arch, version in sorted(have - said):
        report.add("debian", f"{name}:{arch}", f"{version} installed, not in the SBOM")
    for name, arch, version in sorted(said - have):
        report.add("debian", f"{name}:{arch}", f"{version} in the SBOM, not installed")
    report.facts.append(f"{len(have)} Debian packages match the SBOM")
