"""The venv against the lock, the SBOM and each wheel's RECORD: every distribution installed is the locked
one, every file has the hash a RECORD gives it (or the one slim.sh or the SBOM recorded), and every other file
in site-packages is a checked compilation of a listed source or a file the SBOM lists."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from trlstack.commands.verify.hashes import record_hash, sha256_hex
from trlstack.commands.verify.layout import VENV
from trlstack.commands.verify.parsers import (
    Dist,
    SlimChange,
    installed_dists,
    locked_dependencies,
    locked_wheels,
    overlay,
    record_rows,
    site_packages,
)
from trlstack.commands.verify.provenance import Provenance
from trlstack.commands.verify.report import Report
from trlstack.commands.verify.trees import Tree


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
