"""What the lock, the SBOM and the venv say, read into plain values: uv.lock's wheels and dependencies, the
build's lists (packages left out, files slim.sh changed), the SBOM, and each installed distribution's METADATA
and RECORD. Nothing here judges; the checks compare what these return."""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from trlstack.commands.verify.layout import VENV
from trlstack.commands.verify.trees import Tree


def normalize(name: str) -> str:
    """PEP 503 name: case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


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
