"""trlstack verify on small image file systems made here: the provenance files are written by the image's own
docker/sbom.py, so the SBOM the build writes and the checks verify makes are tested together."""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import io
import json
import py_compile
import tarfile
from pathlib import Path

import pytest
from trlstack import verify
from trlstack.cli import main as trlstack_main

REPO = Path(__file__).resolve().parents[2]
SITE = "opt/trlstack/venv/lib/python3.13/site-packages"
WHEEL_URL = "https://files.example/demo-1.0-py3-none-any.whl"
DPKG = """Package: tini
Status: install ok installed
Architecture: amd64
Version: 0.19.0-3

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
"""


def load_sbom_module():
    spec = importlib.util.spec_from_file_location("trlstack_image_sbom", REPO / "docker" / "sbom.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def b64(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_dist(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A wheel-installed distribution: its files, METADATA, WHEEL and a RECORD with every hash."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-any\n")
    rows = []
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
        rows.append(f"{relative},{b64(data)},{len(data)}")
    for meta in ("METADATA", "WHEEL"):
        rows.append(f"{info.name}/{meta},{b64((info / meta).read_bytes())},")
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


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
        )
    )
    assert errors == []
    (provenance / "sbom.cdx.json").write_text(json.dumps(document, indent=2) + "\n")
    # The project is installed after the SBOM is made, as in the runtime stage.
    write_dist(site, "trlstack", "0.1.0", {"trlstack/__init__.py": b""})
    return root


def findings(root: Path, **expect: str) -> list[str]:
    return [str(f) for f in verify.verify_tree(verify.DirTree(root), verify.AREAS, expect).findings]


def test_an_image_as_built_verifies(image: Path) -> None:
    report = verify.verify_tree(verify.DirTree(image), verify.AREAS, {})
    assert report.findings == []
    assert any("2 Python distributions" in fact and "1 packages left out" in fact for fact in report.facts)
    assert any("1 Debian packages match" in fact for fact in report.facts)


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


def test_labels_must_name_this_lock_and_sbom(image: Path) -> None:
    lock = hashlib.sha256((image / "opt/trlstack/provenance/uv.lock").read_bytes()).hexdigest()
    assert findings(image, **{verify.LOCK_LABEL: lock}) == []
    found = findings(image, **{verify.SBOM_LABEL: "0" * 64})
    assert len(found) == 1 and found[0].startswith("provenance: sbom.cdx.json: sha256 ")


def test_debian_packages_must_equal_the_sbom(image: Path) -> None:
    status = image / "var/lib/dpkg/status"
    status.write_text(DPKG.replace("0.19.0-3", "0.19.0-4"))
    assert sorted(findings(image)) == [
        "debian: tini:amd64: 0.19.0-3 in the SBOM, not installed",
        "debian: tini:amd64: 0.19.0-4 installed, not in the SBOM",
    ]


def test_missing_provenance_says_what_the_image_is(tmp_path: Path) -> None:
    sbom = "provenance: /opt/trlstack/provenance/sbom.cdx.json"
    assert f"{sbom}: missing: the image was not built by docker/build.sh" in findings(tmp_path)


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
    docker_save(archive, [layer(files)], {verify.SBOM_LABEL: sbom})
    assert (
        verify.verify_tree(verify.TarTree.load(archive), verify.AREAS, {verify.SBOM_LABEL: sbom}).findings
        == []
    )

    # A later layer that deletes one file and rewrites another: both are reported.
    docker_save(
        archive,
        [layer(files), layer({f"{SITE}/demo/__init__.py": None, f"{SITE}/demo/lib.so": b"ELF!"})],
        {verify.SBOM_LABEL: sbom},
    )
    tree = verify.TarTree.load(archive)
    assert tree.labels == {verify.SBOM_LABEL: sbom}
    found = [str(f) for f in verify.verify_tree(tree, verify.AREAS, {}).findings]
    assert f"python: demo /{SITE}/demo/__init__.py: missing" in found
    assert f"python: demo /{SITE}/demo/lib.so: differs from the stripped file slim.sh recorded" in found


def test_cli_exit_codes(image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert trlstack_main(["verify", "--root", str(image), "--only", "python", "--only", "debian"]) == 0
    assert "OK" in capsys.readouterr().out
    (image / SITE / "demo/__init__.py").write_bytes(b"VALUE = 3\n")
    assert trlstack_main(["verify", "--root", str(image), "--only", "python"]) == 1
    assert "demo/__init__.py: sha256 differs" in capsys.readouterr().out
    assert trlstack_main(["verify", "--root", str(image / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_record_hash_spelling() -> None:
    assert (
        verify.record_hash(hashlib.sha256(b"").hexdigest())
        == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    )


def test_a_path_two_wheels_install_or_a_wrong_record_is_judged_by_the_build(tmp_path: Path) -> None:
    site = tmp_path / SITE
    write_dist(site, "first", "1.0", {"shared/mod.py": b"first\n", "first/lib.so": b"as the wheel ships it"})
    write_dist(site, "second", "1.0", {"shared/mod.py": b"second\n"})  # installed last: its bytes stay
    (site / "first/lib.so").write_bytes(b"the wheel's RECORD is wrong")  # the SBOM records what was installed
    tree = verify.DirTree(tmp_path)
    dists = verify.installed_dists(tree, SITE)
    known = {
        "lib/python3.13/site-packages/first/lib.so": hashlib.sha256(
            b"the wheel's RECORD is wrong"
        ).hexdigest()
    }

    def check() -> list[str]:
        report = verify.Report()
        verify.check_files(tree, SITE, dists, {}, known, report)
        return [str(f) for f in report.findings]

    assert check() == []
    (site / "first/lib.so").write_bytes(b"tampered")
    (site / "shared/mod.py").write_bytes(b"third\n")
    assert check() == [
        f"python: first /{SITE}/first/lib.so: differs from its RECORD and from the file the SBOM lists",
        f"python: first second /{SITE}/shared/mod.py: sha256 differs from first second's RECORD",
    ]


def lock_text(needs: dict[str, list[str]], extras: dict[str, list[str]] | None = None) -> str:
    """A uv.lock of packages at version 1.0 with these dependencies (and each one's extra `cu13`)."""
    blocks = []
    for name, deps in needs.items():
        block = f'[[package]]\nname = "{name}"\nversion = "1.0"\n'
        block += "dependencies = [" + ", ".join(f'{{ name = "{d}" }}' for d in deps) + "]\n"
        if extras and name in extras:
            block += "\n[package.optional-dependencies]\ncu13 = ["
            block += ", ".join(f'{{ name = "{d}" }}' for d in extras[name]) + "]\n"
        blocks.append(block)
    return "\n".join(blocks)


def test_where_one_wheel_overlays_another_its_copy_must_be_the_one_installed(tmp_path: Path) -> None:
    site = tmp_path / SITE
    write_dist(site, "base", "1.0", {"shared/lib.so": b"generic build\n"})
    write_dist(site, "cu13", "1.0", {"shared/lib.so": b"CUDA 13 build\n"})
    tree = verify.DirTree(tmp_path)
    dists = verify.installed_dists(tree, SITE)
    lock = lock_text({"base": [], "cu13": ["base"], "front": ["base"]}, extras={"front": ["cu13"]})
    needs = verify.locked_dependencies(lock)
    assert needs == {"base": set(), "cu13": {"base"}, "front": {"base", "cu13"}}

    def check(needs: dict[str, set[str]]) -> list[str]:
        report = verify.Report()
        verify.check_files(tree, SITE, dists, {}, {}, report, needs)
        return [str(f) for f in report.findings]

    assert check(needs) == []  # write_dist installed cu13 last: its bytes stay
    (site / "shared/lib.so").write_bytes(b"generic build\n")  # base written last, as a warm cache's order can
    assert check(needs) == [
        f"python: base cu13 /{SITE}/shared/lib.so: "
        "holds base's copy, not that of cu13, which needs and overlays it"
    ]
    assert check({}) == []  # neither needs the other: either copy is one a wheel ships


def test_a_dependency_cycle_in_the_lock_ends() -> None:
    lock = lock_text({"a": ["b"], "b": ["a"]})
    assert verify.locked_dependencies(lock)["a"] >= {"b"}
    assert verify.overlay(["a", "b"], verify.locked_dependencies(lock)) in {"a", "b"}
