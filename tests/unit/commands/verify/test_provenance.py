"""trlstack.commands.verify.provenance: the SBOM the build writes, the labels that must name it and the
lock, the kernels lock the SBOM must name, and an image without provenance."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trlstack.commands.verify.areas import verify_tree
from trlstack.commands.verify.layout import LOCK_LABEL, SBOM_LABEL
from trlstack.commands.verify.trees import DirTree

from .built_image import WHEEL_URL, findings, load_sbom_module


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


def test_the_sbom_names_each_baked_kernel_and_its_lock(tmp_path: Path) -> None:
    cache, sha = tmp_path / "kernels", "c" * 40
    (cache / "kernels--org--attn/snapshots" / sha / "build/torch211-cxx11-cu130-x86_64-linux").mkdir(
        parents=True
    )
    variants = {
        "torch211-cxx11-cu130-x86_64-linux": {"hash": "sha256-1", "hash_type": "git_lfs_concat"},
        "torch210-cxx11-cu128-x86_64-linux": {"hash": "sha256-2", "hash_type": "git_lfs_concat"},
    }
    (cache / "kernels.lock").write_text(
        json.dumps([{"repo_id": "org/attn", "sha": sha, "variants": variants}])
    )
    components, properties = load_sbom_module().kernel_components(cache)
    assert components == [
        {
            "type": "library",
            "bom-ref": f"kernel:org/attn@{sha}:torch211-cxx11-cu130-x86_64-linux",
            "name": "org/attn",
            "version": sha,
            "properties": [
                {"name": "trlstack:source", "value": "kernels-hub"},
                {"name": "trlstack:kernel-variant", "value": "torch211-cxx11-cu130-x86_64-linux"},
                {"name": "trlstack:kernel-variant-hash", "value": "sha256-1"},
            ],
        }
    ]
    lock_sha256 = hashlib.sha256((cache / "kernels.lock").read_bytes()).hexdigest()
    assert properties == [{"name": "trlstack:kernels-lock-sha256", "value": lock_sha256}]
    assert load_sbom_module().kernel_components(tmp_path / "empty") == ([], [])


def test_a_kernels_lock_the_sbom_does_not_name_is_a_difference(image: Path) -> None:
    def provenance_findings() -> list[str]:
        return [str(f) for f in verify_tree(DirTree(image), ["provenance"], {}).findings]

    assert provenance_findings() == []  # built without Hub kernels: the SBOM names no lock
    lock = image / "opt/trlstack/kernels/kernels.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("[]")
    assert provenance_findings() == [
        f"provenance: /opt/trlstack/kernels/kernels.lock: sha256 {hashlib.sha256(b'[]').hexdigest()}, "
        "the SBOM says None"
    ]
