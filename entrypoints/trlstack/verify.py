"""`trlstack verify`: prove that an image holds exactly what its commit locks, and print every difference.

Checked against the facts the build stored in /opt/trlstack/provenance (uv.lock, excluded-packages.txt, the
SBOM, slim.sh's manifest):
  - the SBOM names this uv.lock, slim manifest and list of left-out packages (by sha256 and by name), and the
    image's labels name this uv.lock and this SBOM (when checking an image or an archive from outside);
  - every Python distribution in the venv is in the SBOM and every SBOM package is installed, at the locked
    version, from a wheel uv.lock lists with the same sha256, with the RECORD the build recorded for it;
  - every file each RECORD lists has its hash (where two wheels list one path and one needs the other, the
    hash of the one that needs it), except the files slim.sh removed or stripped, which its
    manifest lists with their new hashes; every other file in site-packages is one the SBOM lists (uv's venv
    files), and each .pyc is a hash-checked compilation of its source;
  - the packages excluded-packages.txt leaves out are in uv.lock and not installed;
  - the Debian packages dpkg lists equal the SBOM's;
  - the Kernels Hub cache equals its kernels.lock: every locked kernel at its revision, every build variant
    hashing to the lock's value (the `kernels` library's own check), nothing else.
Exit 0 when all hold, 1 with one line per difference otherwise.

Where: inside a container of the image (`trlstack verify`), on an unpacked file system (`--root DIR`, e.g. a
.sif unpacked with `unsquashfs` or `apptainer build --sandbox`; or run it in the .sif: `apptainer exec
IMAGE.sif trlstack verify`), in a throwaway container of a local image (`--image TAG`), or on a `docker save`
/ OCI archive (`--tarball FILE`, read as a stream, nothing unpacked to disk).

Only the standard library at import time: this file also runs on its own at build time (`--only kernels`)."""

from __future__ import annotations

import argparse
import base64
import csv
import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

PROVENANCE = "opt/trlstack/provenance"
VENV = "opt/trlstack/venv"
KERNELS = "opt/trlstack/kernels"
DPKG_STATUS = "var/lib/dpkg/status"
LOCK_LABEL = "org.trlstack.uv-lock.sha256"
SBOM_LABEL = "org.trlstack.sbom.sha256"
AREAS = ("provenance", "python", "debian", "kernels")
CHUNK = 1 << 20


def normalize(name: str) -> str:
    """PEP 503 name: case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(hex_digest: str) -> str:
    """A sha256 as RECORD files spell it: sha256=<urlsafe base64, unpadded>."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).rstrip(b"=").decode()


def source_hash(data: bytes) -> bytes:
    """The hash a hash-based .pyc holds for its source (PEP 552), as importlib computes it."""
    import importlib.util

    return importlib.util.source_hash(data)


# The file systems verify reads ------------------------------------------------------------------------------


class DirTree:
    """An image's file system as a folder: `/` inside a container, or an unpacked image."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, path: str) -> Path:
        return self.root / path

    def read(self, path: str) -> bytes | None:
        try:
            return self._path(path).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def is_file(self, path: str) -> bool:
        full = self._path(path)
        return full.is_file() and not full.is_symlink()

    def sha256(self, path: str) -> str | None:
        digest = hashlib.sha256()
        try:
            with self._path(path).open("rb") as stream:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        return digest.hexdigest()

    def head(self, path: str, size: int) -> bytes:
        with self._path(path).open("rb") as stream:
            return stream.read(size)

    def source_hash(self, path: str) -> bytes | None:
        data = self.read(path)
        return None if data is None else source_hash(data)

    def files(self, prefix: str) -> Iterator[str]:
        """Regular files under prefix (symlinks are not files here), as paths relative to the root."""
        top = self._path(prefix)
        for folder, _, names in os.walk(top):
            for name in names:
                full = Path(folder) / name
                if full.is_file() and not full.is_symlink():
                    yield full.relative_to(self.root).as_posix()

    @property
    def local_root(self) -> Path:
        return self.root


@dataclass
class _Entry:
    sha256: str
    size: int
    data: bytes | None = None  # kept for the small files verify reads whole
    head: bytes = b""  # first 16 bytes (a .pyc header)
    source_hash: bytes | None = None  # for .py files


@dataclass
class TarTree:
    """An image's file system read from a `docker save` or OCI archive: its layers in order, whiteouts
    applied. Files are hashed as they stream past; only the small files verify reads whole are kept."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def keeps(path: str) -> bool:
        return (
            path.startswith(PROVENANCE + "/")
            or path == DPKG_STATUS
            or bool(re.search(r"\.dist-info/(METADATA|RECORD|WHEEL)$", path))
        )

    @classmethod
    def load(cls, archive: str | Path) -> TarTree:
        tree = cls()
        with tarfile.open(archive) as outer:
            members = {m.name.lstrip("./"): m for m in outer.getmembers()}

            def blob(name: str) -> bytes:
                member = members.get(name.lstrip("./"))
                if member is None:
                    raise ValueError(f"{archive}: no {name} in the archive")
                return outer.extractfile(member).read()  # type: ignore[union-attr]

            if "manifest.json" in members:  # docker save (also written next to the OCI layout)
                manifest = json.loads(blob("manifest.json"))[0]
                config = json.loads(blob(manifest["Config"]))
                layers = manifest["Layers"]
            else:  # OCI image layout: index -> manifest -> config and layers
                index = json.loads(blob("index.json"))
                digest = index["manifests"][0]["digest"].replace(":", "/")
                manifest = json.loads(blob(f"blobs/{digest}"))
                if "manifests" in manifest:
                    digest = manifest["manifests"][0]["digest"].replace(":", "/")
                    manifest = json.loads(blob(f"blobs/{digest}"))
                config = json.loads(blob(f"blobs/{manifest['config']['digest'].replace(':', '/')}"))
                layers = [f"blobs/{layer['digest'].replace(':', '/')}" for layer in manifest["layers"]]
            tree.labels = (config.get("config") or {}).get("Labels") or {}
            for layer in layers:
                member = members[layer.lstrip("./")]
                with outer.extractfile(member) as raw:  # type: ignore[union-attr]
                    tree._apply(raw)
        return tree

    def _apply(self, raw: IO[bytes]) -> None:
        magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        stream = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
        with tarfile.open(fileobj=stream, mode="r|") as layer:
            for member in layer:
                path = posixpath.normpath(member.name.lstrip("/")).removeprefix("./")
                folder, name = posixpath.split(path)
                if name == ".wh..wh..opq":
                    self._drop(folder, keep_folder=True)
                    continue
                if name.startswith(".wh."):
                    self._drop(posixpath.join(folder, name[4:]))
                    continue
                self.entries.pop(path, None)
                if member.isfile():
                    self.entries[path] = self._read(path, layer.extractfile(member))  # type: ignore[arg-type]
                elif member.islnk():
                    target = posixpath.normpath(member.linkname.lstrip("/")).removeprefix("./")
                    if target in self.entries:
                        self.entries[path] = self.entries[target]

    def _read(self, path: str, stream: io.BufferedReader) -> _Entry:
        digest, size, head, kept = hashlib.sha256(), 0, b"", []
        keep = self.keeps(path) or path.endswith(".py")
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            if size == 0:
                head = chunk[:16]
            size += len(chunk)
            if keep:
                kept.append(chunk)
        data = b"".join(kept) if keep else None
        entry = _Entry(digest.hexdigest(), size, head=head)
        if path.endswith(".py"):
            entry.source_hash = source_hash(data or b"")
            data = None
        elif keep:
            entry.data = data
        return entry

    def _drop(self, path: str, keep_folder: bool = False) -> None:
        for name in [n for n in self.entries if n == path or n.startswith(path + "/")]:
            if keep_folder and name == path:
                continue
            del self.entries[name]

    def read(self, path: str) -> bytes | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.data

    def is_file(self, path: str) -> bool:
        return path in self.entries

    def sha256(self, path: str) -> str | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.sha256

    def head(self, path: str, size: int) -> bytes:
        return self.entries[path].head[:size]

    def source_hash(self, path: str) -> bytes | None:
        entry = self.entries.get(path)
        return None if entry is None else entry.source_hash

    def files(self, prefix: str) -> Iterator[str]:
        yield from (name for name in self.entries if name.startswith(prefix.rstrip("/") + "/"))

    local_root = None


# What the lock, the SBOM and the venv say -------------------------------------------------------------------


Tree = DirTree | TarTree  # an image's file system, whichever way it is read


@dataclass(frozen=True)
class Finding:
    area: str
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"{self.area}: {self.subject}: {self.detail}"


def locked_wheels(lock_text: str) -> dict[str, dict[str, dict[str, str]]]:
    """name -> version -> wheel filename -> sha256 hex, from uv.lock."""
    locked: dict[str, dict[str, dict[str, str]]] = {}
    for package in tomllib.loads(lock_text).get("package", []):
        if "version" not in package:
            continue
        wheels = {
            wheel["url"].rsplit("/", 1)[1]: wheel["hash"].removeprefix("sha256:")
            for wheel in package.get("wheels", [])
            if "url" in wheel and "hash" in wheel
        }
        locked.setdefault(normalize(package["name"]), {})[package["version"]] = wheels
    return locked


def locked_dependencies(lock_text: str) -> dict[str, set[str]]:
    """name -> every package it needs, directly or not (extras included), from uv.lock."""
    direct: dict[str, set[str]] = {}
    for package in tomllib.loads(lock_text).get("package", []):
        needs = list(package.get("dependencies", []))
        for extra in package.get("optional-dependencies", {}).values():
            needs += extra
        direct.setdefault(normalize(package["name"]), set()).update(normalize(d["name"]) for d in needs)
    closure: dict[str, set[str]] = {}

    def needed(name: str) -> set[str]:
        if name not in closure:
            closure[name] = set()  # a cycle ends here
            for dependency in direct.get(name, ()):
                closure[name] |= {dependency} | needed(dependency)
        return closure[name]

    return {name: needed(name) for name in direct}


def overlay(owners: Iterable[str], needs: Mapping[str, set[str]]) -> str | None:
    """Of the wheels that install one path, the one that needs all the others: its copy is the one meant to be
    there, as a dependency-first install leaves it. None when no one wheel needs the rest."""
    names = set(owners)
    return next((n for n in sorted(names) if names - {n} <= needs.get(n, set())), None)


def excluded_names(text: str) -> list[str]:
    return [normalize(line.split("#")[0].strip()) for line in text.splitlines() if line.split("#")[0].strip()]


@dataclass(frozen=True)
class SlimChange:
    action: str  # removed | stripped
    sha256: str | None


def slim_manifest(text: str) -> dict[str, SlimChange]:
    """venv-relative path -> what docker/slim.sh did to it."""
    changes = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        action, path, *rest = line.split("\t")
        changes[path] = SlimChange(action, rest[0] if rest else None)
    return changes


@dataclass(frozen=True)
class SbomPackage:
    name: str
    version: str
    wheel: str | None
    wheel_sha256: str | None
    record_sha256: str | None


@dataclass
class Sbom:
    root_name: str
    root_version: str
    python: dict[str, SbomPackage]
    debian: set[tuple[str, str, str]]  # (name, arch, version)
    properties: dict[str, list[str]]


def parse_sbom(text: str) -> Sbom:
    data = json.loads(text)
    properties: dict[str, list[str]] = {}
    for prop in data.get("metadata", {}).get("properties", []):
        properties.setdefault(prop["name"], []).append(prop["value"])
    python, debian = {}, set()
    for component in data.get("components", []):
        purl = component.get("purl", "")
        props = {p["name"]: p["value"] for p in component.get("properties", [])}
        if purl.startswith("pkg:pypi/"):
            references = component.get("externalReferences", [])
            hashes = references[0].get("hashes", []) if references else []
            python[normalize(component["name"])] = SbomPackage(
                name=normalize(component["name"]),
                version=component["version"],
                wheel=props.get("trlstack:wheel"),
                wheel_sha256=hashes[0]["content"] if hashes else None,
                record_sha256=props.get("trlstack:record-sha256"),
            )
        elif purl.startswith("pkg:deb/"):
            arch = re.search(r"[?&]arch=([^&]+)", purl)
            debian.add((component["name"], arch.group(1) if arch else "", component["version"]))
    root = data.get("metadata", {}).get("component", {})
    return Sbom(normalize(root.get("name", "")), root.get("version", ""), python, debian, properties)


def dpkg_installed(status: str) -> set[tuple[str, str, str]]:
    packages = set()
    for paragraph in status.strip().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", paragraph, re.M))
        if fields.get("Status") == "install ok installed":
            packages.add((fields["Package"], fields["Architecture"], fields["Version"]))
    return packages


def metadata_field(text: str, name: str) -> str | None:
    match = re.search(rf"^{name}: *(.+?)\s*$", text, re.M)
    return match.group(1) if match else None


@dataclass(frozen=True)
class Dist:
    name: str
    version: str
    dist_info: str  # path relative to the root


def site_packages(tree: Tree) -> str | None:
    folders = sorted(
        {p.split("/site-packages/")[0] for p in tree.files(f"{VENV}/lib") if "/site-packages/" in p}
    )
    return f"{folders[0]}/site-packages" if folders else None


def installed_dists(tree: Tree, site: str) -> dict[str, Dist]:
    dists = {}
    for path in sorted(tree.files(site)):
        relative = path[len(site) + 1 :]
        if not re.fullmatch(r"[^/]+\.dist-info/METADATA", relative):
            continue
        text = (tree.read(path) or b"").decode("utf-8", "replace")
        name, version = metadata_field(text, "Name"), metadata_field(text, "Version")
        if name and version:
            dists[normalize(name)] = Dist(normalize(name), version, posixpath.dirname(path))
    return dists


def record_rows(text: str) -> Iterator[tuple[str, str]]:
    """(path, hash) of each RECORD row; the hash is empty for RECORD itself and files listed without one."""
    for row in csv.reader(io.StringIO(text)):
        if row:
            yield row[0], row[1] if len(row) > 1 else ""


# The checks -------------------------------------------------------------------------------------------------


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    def add(self, area: str, subject: str, detail: str) -> None:
        self.findings.append(Finding(area, subject, detail))


@dataclass
class Provenance:
    lock: str
    excluded: list[str]
    slimmed: dict[str, SlimChange]
    sbom: Sbom
    lock_sha256: str
    sbom_sha256: str
    slimmed_sha256: str


def load_provenance(tree: Tree, report: Report, expect: dict[str, str]) -> Provenance | None:
    files: dict[str, bytes] = {}
    for name in ("uv.lock", "excluded-packages.txt", "slimmed.tsv", "sbom.cdx.json"):
        data = tree.read(f"{PROVENANCE}/{name}")
        if data is None:
            report.add(
                "provenance", f"/{PROVENANCE}/{name}", "missing: the image was not built by docker/build.sh"
            )
        else:
            files[name] = data
    if len(files) < 4:
        return None
    provenance = Provenance(
        lock=files["uv.lock"].decode(),
        excluded=excluded_names(files["excluded-packages.txt"].decode()),
        slimmed=slim_manifest(files["slimmed.tsv"].decode()),
        sbom=parse_sbom(files["sbom.cdx.json"].decode()),
        lock_sha256=sha256_hex(files["uv.lock"]),
        sbom_sha256=sha256_hex(files["sbom.cdx.json"]),
        slimmed_sha256=sha256_hex(files["slimmed.tsv"]),
    )
    check_provenance(provenance, report, expect)
    return provenance


def check_provenance(provenance: Provenance, report: Report, expect: dict[str, str]) -> None:
    """The SBOM names these files, and the labels (when known) name this lock and this SBOM."""
    said = provenance.sbom.properties
    for key, actual, what in (
        ("trlstack:uv-lock-sha256", provenance.lock_sha256, "uv.lock"),
        ("trlstack:slimmed-sha256", provenance.slimmed_sha256, "slimmed.tsv"),
    ):
        if said.get(key) != [actual]:
            report.add("provenance", what, f"sha256 {actual}, the SBOM says {said.get(key)}")
    listed = sorted(normalize(name) for name in said.get("trlstack:excluded-package", []))
    if listed != sorted(provenance.excluded):
        report.add(
            "provenance", "excluded-packages.txt", f"names {sorted(provenance.excluded)}, the SBOM {listed}"
        )
    for label, actual, what in (
        (LOCK_LABEL, provenance.lock_sha256, "uv.lock"),
        (SBOM_LABEL, provenance.sbom_sha256, "sbom.cdx.json"),
    ):
        if label in expect and expect[label] != actual:
            report.add("provenance", what, f"sha256 {actual}, the image's label {label} says {expect[label]}")
    report.facts.append(f"uv.lock sha256 {provenance.lock_sha256}, SBOM sha256 {provenance.sbom_sha256}")


def check_python(tree: Tree, provenance: Provenance, report: Report) -> None:
    site = site_packages(tree)
    if site is None:
        report.add("python", f"/{VENV}", "no site-packages")
        return
    sbom, locked = provenance.sbom, locked_wheels(provenance.lock)
    dists = installed_dists(tree, site)
    venv_files = dict(line.split(" ", 1)[::-1] for line in sbom.properties.get("trlstack:venv-file", []))

    for name in sorted(set(sbom.python) | set(dists)):
        package, dist = sbom.python.get(name), dists.get(name)
        if name == sbom.root_name and dist is not None:
            if dist.version != sbom.root_version:
                report.add(
                    "python", name, f"installed {dist.version}, the SBOM's image is {sbom.root_version}"
                )
            continue
        if dist is None:
            report.add("python", name, f"in the SBOM ({package.version}) but not installed")  # type: ignore[union-attr]
            continue
        if package is None:
            why = "left out by excluded-packages.txt" if name in provenance.excluded else "not in the SBOM"
            report.add("python", name, f"installed ({dist.version}) but {why}")
            continue
        if dist.version != package.version:
            report.add("python", name, f"installed {dist.version}, the SBOM says {package.version}")
        wheels = locked.get(name, {}).get(package.version)
        if wheels is None:
            report.add("python", name, f"{package.version} is not in uv.lock")
        elif package.wheel not in wheels or wheels[package.wheel] != package.wheel_sha256:
            report.add("python", name, f"wheel {package.wheel} ({package.wheel_sha256}) is not in uv.lock")
        record = tree.read(f"{dist.dist_info}/RECORD")
        if record is None:
            report.add("python", name, f"no RECORD in /{dist.dist_info}")
            continue
        if sha256_hex(record) != package.record_sha256:
            report.add("python", name, f"/{dist.dist_info}/RECORD differs from the one the build recorded")

    for name in provenance.excluded:
        if name not in locked:
            report.add("python", name, "excluded-packages.txt names a package uv.lock lacks")

    needs = locked_dependencies(provenance.lock)
    recorded = check_files(tree, site, dists, provenance.slimmed, venv_files, report, needs)
    check_unrecorded(tree, site, recorded, venv_files, report)
    report.facts.append(
        f"{len(dists)} Python distributions, {len(recorded)} files match uv.lock's wheels and the SBOM; "
        f"{len(provenance.excluded)} packages left out (excluded-packages.txt); "
        f"{len(provenance.slimmed)} files removed or stripped as docker/slim.sh's manifest says"
    )


def check_files(
    tree: Tree,
    site: str,
    dists: dict[str, Dist],
    slimmed: dict[str, SlimChange],
    venv_files: dict[str, str],
    report: Report,
    needs: Mapping[str, set[str]] | None = None,
) -> set[str]:
    """Every file of every RECORD has the hash of a RECORD listing it, or is what slim.sh made of it, or is a
    file the SBOM lists with its hash; returns the recorded paths. Where two wheels install one path and one
    needs the other (`needs`, from uv.lock), the file must be that one's: it overlays the other."""
    listed: dict[str, dict[str, str]] = {}  # path -> distribution -> hash its RECORD gives
    for name, dist in sorted(dists.items()):
        text = (tree.read(f"{dist.dist_info}/RECORD") or b"").decode("utf-8", "replace")
        for relative, expected in record_rows(text):
            listed.setdefault(posixpath.normpath(posixpath.join(site, relative)), {})[name] = expected
    for path, owners in sorted(listed.items()):
        who = " ".join(sorted(owners))
        venv_relative = path.removeprefix(VENV + "/")
        change = slimmed.get(venv_relative)
        actual = tree.sha256(path) if tree.is_file(path) else None
        if change is not None and change.action == "removed":
            if actual is not None:
                report.add("python", f"{who} /{path}", "present, but docker/slim.sh removed it at build time")
        elif change is not None and change.action == "stripped":
            if actual != change.sha256:
                report.add("python", f"{who} /{path}", "differs from the stripped file slim.sh recorded")
        elif actual is None:
            report.add("python", f"{who} /{path}", "missing")
        elif "" in owners.values() or record_hash(actual) in owners.values():
            meant = overlay(owners, needs or {}) if len(owners) > 1 else None
            if meant is not None and record_hash(actual) != owners[meant] and owners[meant]:
                holder = " ".join(sorted(n for n, h in owners.items() if h == record_hash(actual)))
                why = f"holds {holder}'s copy, not that of {meant}, which needs and overlays it"
                report.add("python", f"{who} /{path}", why)
        elif venv_relative in venv_files:
            if venv_files[venv_relative] != actual:
                report.add(
                    "python", f"{who} /{path}", "differs from its RECORD and from the file the SBOM lists"
                )
        else:
            report.add("python", f"{who} /{path}", f"sha256 differs from {who}'s RECORD")
    return set(listed)


def check_unrecorded(
    tree: Tree, site: str, recorded: set[str], venv_files: dict[str, str], report: Report
) -> None:
    """Files in site-packages that no RECORD lists: the .pyc of a listed source, or a file the SBOM lists."""
    for path in sorted(tree.files(site)):
        if path in recorded:
            continue
        relative = path.removeprefix(VENV + "/")
        if "/__pycache__/" in path and path.endswith(".pyc"):
            folder, name = posixpath.split(path)
            source = posixpath.join(posixpath.dirname(folder), name.split(".", 1)[0] + ".py")
            if source not in recorded and source.removeprefix(VENV + "/") not in venv_files:
                report.add("python", f"/{path}", "bytecode whose source no wheel installed")
                continue
            header = tree.head(path, 16)
            # PEP 552: flags 0b11 = hash-based and checked against the source at import.
            if int.from_bytes(header[4:8], "little") != 0b11:
                report.add(
                    "python", f"/{path}", "not a checked hash-based .pyc (the build writes only those)"
                )
            elif header[8:16] != tree.source_hash(source):
                report.add("python", f"/{path}", f"compiled from a different {posixpath.basename(source)}")
            continue
        if relative in venv_files:
            if tree.sha256(path) != venv_files[relative]:
                report.add("python", f"/{path}", "differs from the venv file the SBOM lists")
            continue
        report.add("python", f"/{path}", "in site-packages but in no RECORD and not in the SBOM")


def check_debian(tree: Tree, provenance: Provenance, report: Report) -> None:
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


def check_kernels(root: Path | None, report: Report) -> None:
    """The Kernels Hub cache against its kernels.lock, with the `kernels` library's own hash check."""
    cache = None if root is None else root / KERNELS
    if cache is None:
        report.facts.append("kernel cache: checked only on a file system (inside the container or --root)")
        return
    lock_path = cache / "kernels.lock"
    if not lock_path.exists():
        names = sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []
        if names:
            report.add("kernels", f"/{KERNELS}", f"holds {names} but no kernels.lock")
        else:
            report.facts.append("kernel cache: empty (built with WITH_KERNEL_CACHE=0)")
        return
    for finding in kernel_cache_findings(cache, json.loads(lock_path.read_text())):
        report.findings.append(finding)
    report.facts.append(f"kernel cache matches {lock_path}")


def kernel_cache_findings(cache: Path, lock: list[dict[str, Any]]) -> Iterator[Finding]:
    """Differences between a Hugging Face cache of kernels and a kernels.lock (the `kernels lock` format)."""
    from huggingface_hub.file_download import repo_folder_name
    from kernels.utils import validate_kernel

    expected = {}
    for entry in lock:
        folder = cache / repo_folder_name(repo_id=entry["repo_id"], repo_type="kernel")
        expected[folder.name] = entry
        snapshot = folder / "snapshots" / entry["sha"]
        subject = f"{entry['repo_id']}@{entry['sha']}"
        variants = (
            sorted(p.name for p in (snapshot / "build").iterdir()) if (snapshot / "build").is_dir() else []
        )
        if not variants:
            yield Finding("kernels", subject, "locked but not in the cache")
        for variant in variants:
            lock_hash = entry["variants"].get(variant, {}).get("hash")
            if lock_hash is None:
                yield Finding(
                    "kernels", f"{subject} {variant}", "cached build variant the lock does not name"
                )
                continue
            try:
                validate_kernel(repo_path=snapshot, variant=variant, hash=lock_hash)
            except ValueError as error:
                yield Finding("kernels", f"{subject} {variant}", str(error))
        snapshots = folder / "snapshots"
        for other in sorted(p.name for p in snapshots.iterdir()) if snapshots.is_dir() else []:
            if other != entry["sha"]:
                yield Finding(
                    "kernels", f"{entry['repo_id']}@{other}", "cached revision the lock does not name"
                )
    for folder in sorted(p for p in cache.iterdir() if p.is_dir() and p.name.startswith("kernels--")):
        if folder.name not in expected:
            yield Finding("kernels", folder.name, "cached kernel the lock does not name")


def verify_tree(tree: Tree, areas: Iterable[str], expect: dict[str, str]) -> Report:
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


# Where the image is -----------------------------------------------------------------------------------------


def image_labels(image: str) -> dict[str, str]:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise LookupError(
            f"no local image {image!r} ({done.stderr.strip()}); build it or `docker load` it first"
        )
    return json.loads(done.stdout) or {}


def verify_image(image: str, areas: list[str]) -> int:
    """Run verify inside a throwaway container of the image, with the image's labels to check against."""
    labels = image_labels(image)
    argv = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "trlstack", image, "verify"]
    for label, option in ((LOCK_LABEL, "--expect-lock-sha256"), (SBOM_LABEL, "--expect-sbom-sha256")):
        if labels.get(label):
            argv += [option, labels[label]]
    for area in areas:
        argv += ["--only", area]
    return subprocess.run(argv).returncode


def print_report(report: Report, where: str) -> int:
    for finding in report.findings:
        print(f"trlstack verify: {finding}")
    for fact in report.facts:
        print(f"trlstack verify: {fact}")
    if report.findings:
        print(f"trlstack verify: {where}: {len(report.findings)} differences", file=sys.stderr)
        return 1
    print(f"trlstack verify: {where}: OK")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Check that an image holds exactly what its commit locks: every installed Python file against "
        "uv.lock's wheels and the SBOM, the Debian packages against the SBOM, the Kernels Hub cache against "
        "kernels.lock. Prints each difference; exit 1 if there is any. Without an option it checks the "
        "container it runs in."
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--root", metavar="DIR", help="an unpacked image file system (e.g. an unpacked .sif)")
    where.add_argument(
        "--image", metavar="TAG", help="a local Docker image, checked in a throwaway container"
    )
    where.add_argument("--tarball", metavar="FILE", help="a `docker save` or OCI archive of the image")
    parser.add_argument("--only", action="append", choices=AREAS, help="check only this part (repeatable)")
    parser.add_argument(
        "--expect-lock-sha256", metavar="SHA256", help="the uv.lock sha256 the image's label gives"
    )
    parser.add_argument(
        "--expect-sbom-sha256", metavar="SHA256", help="the SBOM sha256 the image's label gives"
    )


def run(args: argparse.Namespace) -> int:
    areas = args.only or list(AREAS)
    try:
        if args.image:
            return verify_image(args.image, args.only or [])
        expect: dict[str, str] = {}
        tree: Tree
        if args.tarball:
            if not os.path.isfile(args.tarball):
                raise LookupError(f"--tarball {args.tarball}: no such file")
            tree = TarTree.load(args.tarball)
            expect = {k: v for k, v in tree.labels.items() if k in (LOCK_LABEL, SBOM_LABEL)}
            where = args.tarball
        else:
            root = args.root or "/"
            if not os.path.isdir(root):
                raise LookupError(f"--root {root}: no such folder")
            tree, where = DirTree(root), root
        if args.expect_lock_sha256:
            expect[LOCK_LABEL] = args.expect_lock_sha256
        if args.expect_sbom_sha256:
            expect[SBOM_LABEL] = args.expect_sbom_sha256
        return print_report(verify_tree(tree, areas, expect), where)
    except LookupError as error:
        from trlstack.errors import UsageError

        raise UsageError(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    """Standalone entry, for the image build (no trlstack package there yet)."""
    parser = argparse.ArgumentParser(prog="verify.py")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.image or args.tarball:
        parser.error("standalone, verify.py checks a file system: use --root")
    return print_report(
        verify_tree(DirTree(args.root or "/"), args.only or list(AREAS), {}), args.root or "/"
    )


if __name__ == "__main__":
    raise SystemExit(main())
