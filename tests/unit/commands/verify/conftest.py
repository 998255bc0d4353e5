"""The image the tests of trlstack.commands.verify check: its provenance files are written by the image's own
docker/sbom.py, so the SBOM the build writes and the checks verify makes are tested together."""

from __future__ import annotations

import argparse
import hashlib
import json
import py_compile
from pathlib import Path

import pytest

from .built_image import DPKG, SITE, WHEEL_URL, load_sbom_module, write_dist


@pytest.fixture
def image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An image file system as docker/build.sh makes one: a venv holding `demo` (a locked wheel, a file
    stripped, a file removed, hash-checked bytecode), uv's venv file, the project, Debian's status, the
    provenance."""
    root = tmp_path / "root"
    venv = root / "opt/trlstack/venv"
    site = root / SITE
    write_dist(
        site,
        "demo",
        "1.0",
        {"demo/__init__.py": b"VALUE = 1\n", "demo/lib.so": b"ELF with debug", "demo/lib.a": b"archive"},
    )
    (site / "_virtualenv.py").write_text("# written by uv\n")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    py_compile.compile(
        str(site / "demo/__init__.py"),
        cfile=str(site / "demo/__pycache__/__init__.cpython-313.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    # What docker/slim.sh does, and its manifest.
    (site / "demo/lib.so").write_bytes(b"ELF")
    (site / "demo/lib.a").unlink()
    provenance = root / "opt/trlstack/provenance"
    provenance.mkdir(parents=True)
    (provenance / "slimmed.tsv").write_text(
        f"removed\tlib/python3.13/site-packages/demo/lib.a\n"
        f"stripped\tlib/python3.13/site-packages/demo/lib.so\t{hashlib.sha256(b'ELF').hexdigest()}\n"
    )
    (provenance / "excluded-packages.txt").write_text("gone   # left out on purpose\n")
    (provenance / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "demo"\nversion = "1.0"\n'
        f'wheels = [{{ url = "{WHEEL_URL}", hash = "sha256:{"a" * 64}" }}]\n\n'
        '[[package]]\nname = "gone"\nversion = "2.0"\n'
    )
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(DPKG)
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="13"\n')

    export = {
        "metadata": {
            "tools": [{"name": "uv"}],
            "component": {"bom-ref": "trlstack-1@0.1.0", "name": "trlstack", "version": "0.1.0"},
        },
        "components": [
            {
                "type": "library",
                "bom-ref": "demo-2@1.0",
                "name": "demo",
                "version": "1.0",
                "purl": "pkg:pypi/demo@1.0",
                "externalReferences": [
                    {
                        "type": "distribution",
                        "url": WHEEL_URL,
                        "hashes": [{"alg": "SHA-256", "content": "a" * 64}],
                    }
                ],
                "properties": [{"name": "uv:package:marker", "value": "sys_platform == 'linux'"}],
            },
            {"type": "library", "bom-ref": "gone-3@2.0", "name": "gone", "version": "2.0"},
            {
                "type": "library",
                "bom-ref": "winonly-4@1.0",
                "name": "winonly",
                "version": "1.0",
                "properties": [{"name": "uv:package:marker", "value": "sys_platform == 'win32'"}],
            },
        ],
        "dependencies": [{"ref": "trlstack-1@0.1.0", "dependsOn": ["demo-2@1.0", "gone-3@2.0"]}],
    }
    (tmp_path / "export.json").write_text(json.dumps(export))
    sbom = load_sbom_module()
    monkeypatch.setattr(sbom, "DPKG_STATUS", root / "var/lib/dpkg/status")
    monkeypatch.setattr(sbom, "OS_RELEASE", root / "etc/os-release")
    document, errors = sbom.build_sbom(
        argparse.Namespace(
            uv_export=tmp_path / "export.json",
            venv=venv,
            excluded=provenance / "excluded-packages.txt",
            slimmed=provenance / "slimmed.tsv",
            lock=provenance / "uv.lock",
            kernel_cache=root / "opt/trlstack/kernels",
        )
    )
    assert errors == []
    (provenance / "sbom.cdx.json").write_text(json.dumps(document, indent=2) + "\n")
    # The project is installed after the SBOM is made, as in the runtime stage.
    write_dist(site, "trlstack", "0.1.0", {"trlstack/__init__.py": b""})
    return root
