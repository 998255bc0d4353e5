"""trlstack.commands.verify.debian: the Debian packages installed must equal the SBOM's, both ways."""

from __future__ import annotations

from pathlib import Path

from .built_image import DPKG, findings


def test_debian_packages_must_equal_the_sbom(image: Path) -> None:
    status = image / "var/lib/dpkg/status"
    status.write_text(DPKG.replace("0.19.0-3", "0.19.0-4"))
    assert sorted(findings(image)) == [
        "debian: tini:amd64: 0.19.0-3 in the SBOM, not installed",
        "debian: tini:amd64: 0.19.0-4 installed, not in the SBOM",
    ]
