"""trlstack.commands.verify.trees: a `docker save` archive is read layer by layer, whiteouts applied,
labels read."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from trlstack.commands.verify.areas import AREAS, verify_tree
from trlstack.commands.verify.layout import SBOM_LABEL
from trlstack.commands.verify.trees import TarTree

from .built_image import SITE


def layer(files: dict[str, bytes | None]) -> bytes:
    """A layer tar; None makes a whiteout."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            if data is None:
                folder, base = name.rsplit("/", 1)
                name, data = f"{folder}/.wh.{base}", b""
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def docker_save(path: Path, layers: list[bytes], labels: dict[str, str]) -> None:
    config = json.dumps({"config": {"Labels": labels}}).encode()
    with tarfile.open(path, "w") as tar:
        members = {"config.json": config, "manifest.json": b""}
        names = [f"blobs/{i}.tar" for i in range(len(layers))]
        members.update(zip(names, layers, strict=True))
        members["manifest.json"] = json.dumps([{"Config": "config.json", "Layers": names}]).encode()
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_an_archive_is_read_layer_by_layer(image: Path, tmp_path: Path) -> None:
    files = {p.relative_to(image).as_posix(): p.read_bytes() for p in image.rglob("*") if p.is_file()}
    sbom = hashlib.sha256(files["opt/trlstack/provenance/sbom.cdx.json"]).hexdigest()
    archive = tmp_path / "image.tar"
    docker_save(archive, [layer(files)], {SBOM_LABEL: sbom})
    assert verify_tree(TarTree.load(archive), AREAS, {SBOM_LABEL: sbom}).findings == []

    # A later layer that deletes one file and rewrites another: both are reported.
    docker_save(
        archive,
        [layer(files), layer({f"{SITE}/demo/__init__.py": None, f"{SITE}/demo/lib.so": b"ELF!"})],
        {SBOM_LABEL: sbom},
    )
    tree = TarTree.load(archive)
    assert tree.labels == {SBOM_LABEL: sbom}
    found = [str(f) for f in verify_tree(tree, AREAS, {}).findings]
    assert f"python: demo /{SITE}/demo/__init__.py: missing" in found
    assert f"python: demo /{SITE}/demo/lib.so: differs from the stripped file slim.sh recorded" in found
