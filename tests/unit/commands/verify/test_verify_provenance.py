"""trlstack.commands.verify.provenance: the SBOM the build writes, the labels that must name it and the
lock, and an image without provenance."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from built_image import WHEEL_URL, findings
from trlstack.commands.verify.layout import LOCK_LABEL, SBOM_LABEL


def test_the_sbom_holds_what_the_image_holds(image: Path) -> None:
    sbom = json.loads((image / "opt/trlstack/provenance/sbom.cdx.json").read_text())
    names = [c["name"] for c in sbom["components"]]
    assert names == ["demo", "tini"]  # the left-out and the Windows-only packages are not in the image
    demo = sbom["components"][0]
    assert [r["url"] for r in demo["externalReferences"]] == [WHEEL_URL]
    assert {"name": "trlstack:wheel", "value": "demo-1.0-py3-none-any.whl"} in demo["properties"]
    assert sbom["metadata"]["timestamp"] == "2023-11-14T22:13:20Z"
    assert {"name": "trlstack:excluded-package", "value": "gone"} in sbom["metadata"]["properties"]
    assert sbom["components"][1]["purl"] == "pkg:deb/debian/tini@0.19.0-3?arch=amd64&distro=debian-13"


def test_labels_must_name_this_lock_and_sbom(image: Path) -> None:
    lock = hashlib.sha256((image / "opt/trlstack/provenance/uv.lock").read_bytes()).hexdigest()
    assert findings(image, **{LOCK_LABEL: lock}) == []
    found = findings(image, **{SBOM_LABEL: "0" * 64})
    assert len(found) == 1 and found[0].startswith("provenance: sbom.cdx.json: sha256 ")


def test_missing_provenance_says_what_the_image_is(tmp_path: Path) -> None:
    sbom = "provenance: /opt/trlstack/provenance/sbom.cdx.json"
    assert f"{sbom}: missing: the image was not built by docker/build.sh" in findings(tmp_path)
