"""Write the image's CycloneDX 1.5 SBOM: the Python packages of `uv export` that this venv holds, the Kernels
Hub kernels baked into its kernel cache and the Debian packages dpkg lists as installed.

Runs at build time with the venv's Python. Each Python component keeps the one wheel that was installed (the
one whose tags the venv's Python ranks highest, as an installer picks) with its sha256 from uv.lock, and gains
the sha256 of the RECORD that wheel installed (`trlstack:record-sha256`): the SBOM pins every installed file.
The metadata names the packages of the lock that the image leaves out (excluded-packages.txt), the sha256 of
uv.lock and of slim.sh's manifest of the files it removed or stripped, and the hash of each installed file no
RECORD vouches for (uv's venv files, files a RECORD gets wrong). Each baked kernel is a component named by its
repository at the locked commit, with the build variant the cache holds and that variant's hash from the lock;
the metadata gives the sha256 of the cache's kernels.lock, which `trlstack verify` holds the cache to. The
same inputs give the same bytes: the timestamp is SOURCE_DATE_EPOCH and the serial number is derived from the
content."""

from __future__ import annotations

import argparse
import base64
import csv
import datetime
import email.parser
import hashlib
import io
import json
import os
import re
import sys
import uuid
from pathlib import Path

from packaging.markers import Marker
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

DPKG_STATUS = Path("/var/lib/dpkg/status")
RANK = {tag: rank for rank, tag in enumerate(sys_tags())}  # this interpreter's tags, most preferred first
OS_RELEASE = Path("/etc/os-release")


def installed(venv: Path) -> dict[str, dict]:
    """name -> version and RECORD sha256 of each distribution in the venv."""
    found = {}
    for dist_info in sorted(venv.glob("lib/python3*/site-packages/*.dist-info")):
        metadata = email.parser.BytesHeaderParser().parsebytes((dist_info / "METADATA").read_bytes())
        found[canonicalize_name(metadata["Name"])] = {
            "version": metadata["Version"],
            "record_sha256": hashlib.sha256((dist_info / "RECORD").read_bytes()).hexdigest(),
        }
    return found


def venv_files(venv: Path, slimmed: Path) -> list[str]:
    """Installed files their RECORDs do not vouch for, bytecode and slim.sh's changes aside: files in
    site-packages no RECORD lists (uv's own venv files) and files whose bytes match none of the RECORDs
    listing them (a wheel whose RECORD disagrees with its own file, a path two wheels install). As "SHA256
    PATH" lines, the path relative to the venv: the SBOM pins them too."""
    site = next(venv.glob("lib/python3*/site-packages"))
    expected: dict[str, set[str]] = {}
    for record in site.glob("*.dist-info/RECORD"):
        for row in csv.reader(io.StringIO(record.read_text())):
            if row:
                expected.setdefault(os.path.normpath(site / row[0]), set()).add(
                    row[1] if len(row) > 1 else ""
                )
    changed = {line.split("\t")[1] for line in slimmed.read_text().splitlines() if line}
    files = {str(p) for p in site.rglob("*") if p.is_file() and not p.is_symlink()}
    lines = []
    for path in sorted(files | {p for p in expected if os.path.isfile(p) and not os.path.islink(p)}):
        relative = os.path.relpath(path, venv)
        if relative in changed or (path.endswith(".pyc") and "/__pycache__/" in path):
            continue
        digest = hashlib.sha256(Path(path).read_bytes()).digest()
        spelled = "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        hashes = expected.get(path)
        if hashes is None or not (spelled in hashes or "" in hashes):
            lines.append(f"{digest.hex()} {relative}")
    return lines


def excluded_names(path: Path) -> list[str]:
    return [
        line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()
    ]


def python_components(export: dict, venv: Path, excluded: list[str]) -> tuple[list[dict], list[str]]:
    """The export's components this venv holds, each reduced to its installed wheel; errors as a list."""
    have = installed(venv)
    left_out = {canonicalize_name(name) for name in excluded}
    components, errors, seen = [], [], set()
    for component in export["components"]:
        name = canonicalize_name(component["name"])
        marker = next(
            (p["value"] for p in component.get("properties", []) if p["name"] == "uv:package:marker"), ""
        )
        if name in left_out or (marker and not Marker(marker).evaluate()):
            continue
        seen.add(name)
        dist = have.get(name)
        if dist is None or dist["version"] != component["version"]:
            errors.append(f"{name}: uv.lock {component['version']}, venv {dist and dist['version']}")
            continue
        # The wheel the installer chose: the one whose tags this interpreter ranks highest (the WHEEL file's
        # Tag lines are not enough: repaired manylinux wheels often keep the tag they were built with).
        wheels = [r for r in component.get("externalReferences", []) if r["url"].endswith(".whl")]
        ranked = sorted(
            (min(RANK.get(tag, len(RANK)) for tag in parse_wheel_filename(r["url"].rsplit("/", 1)[1])[3]), i)
            for i, r in enumerate(wheels)
        )
        if not ranked or ranked[0][0] == len(RANK):
            errors.append(f"{name}: no locked wheel of {component['version']} installs on this Python")
            continue
        wheels = [wheels[ranked[0][1]]]
        filename = wheels[0]["url"].rsplit("/", 1)[1]
        properties = [p for p in component.get("properties", []) if p["name"] != "uv:package:marker"]
        components.append(
            {
                **component,
                "externalReferences": wheels,
                "properties": properties
                + [
                    {"name": "trlstack:wheel", "value": filename},
                    {"name": "trlstack:record-sha256", "value": dist["record_sha256"]},
                ],
            }
        )
    errors += [f"{name}: installed but not in the export of uv.lock" for name in sorted(set(have) - seen)]
    return components, errors


def kernel_components(cache: Path | None) -> tuple[list[dict], list[dict]]:
    """One component per kernel build variant the cache holds, and the metadata property giving the sha256 of
    the cache's kernels.lock; none of either without a lock (no kernels baked)."""
    lock_path = None if cache is None else cache / "kernels.lock"
    if lock_path is None or not lock_path.is_file():
        return [], []
    components = []
    for entry in json.loads(lock_path.read_text()):
        repo, sha = entry["repo_id"], entry["sha"]
        build = cache / f"kernels--{repo.replace('/', '--')}" / "snapshots" / sha / "build"
        for variant in sorted(p.name for p in build.iterdir()) if build.is_dir() else []:
            components.append(
                {
                    "type": "library",
                    "bom-ref": f"kernel:{repo}@{sha}:{variant}",
                    "name": repo,
                    "version": sha,
                    "properties": [
                        {"name": "trlstack:source", "value": "kernels-hub"},
                        {"name": "trlstack:kernel-variant", "value": variant},
                        {"name": "trlstack:kernel-variant-hash", "value": entry["variants"][variant]["hash"]},
                    ],
                }
            )
    lock_sha256 = hashlib.sha256(lock_path.read_bytes()).hexdigest()
    return components, [{"name": "trlstack:kernels-lock-sha256", "value": lock_sha256}]


def debian_components(status: str, distro: str) -> list[dict]:
    """One component per package dpkg lists as installed, sorted by name."""
    components = []
    for paragraph in status.strip().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", paragraph, re.M))
        if fields.get("Status") != "install ok installed":
            continue
        name, version, arch = fields["Package"], fields["Version"], fields["Architecture"]
        components.append(
            {
                "type": "library",
                "bom-ref": f"deb:{name}:{arch}@{version}",
                "name": name,
                "version": version,
                "purl": f"pkg:deb/debian/{name}@{version}?arch={arch}&distro={distro}",
                "properties": [{"name": "trlstack:source", "value": "dpkg"}],
            }
        )
    return sorted(components, key=lambda c: c["bom-ref"])


def distro_id() -> str:
    fields = dict(re.findall(r'^([A-Z_]+)="?([^"\n]*)"?$', OS_RELEASE.read_text(), re.M))
    return f"{fields.get('ID', 'debian')}-{fields.get('VERSION_ID', 'unknown')}"


def build_sbom(args: argparse.Namespace) -> tuple[dict, list[str]]:
    export = json.loads(args.uv_export.read_text())
    excluded = excluded_names(args.excluded)
    python, errors = python_components(export, args.venv, excluded)
    kernels, kernel_properties = kernel_components(args.kernel_cache)
    debian = debian_components(DPKG_STATUS.read_text(), distro_id())
    kept = {c["bom-ref"] for c in python}
    epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    root = export["metadata"]["component"]
    sbom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": export["metadata"].get("tools", [])
            + [{"vendor": "trlstack", "name": "docker/sbom.py", "version": root["version"]}],
            "component": {**root, "type": "container"},
            "properties": [
                {
                    "name": "trlstack:uv-lock-sha256",
                    "value": hashlib.sha256(args.lock.read_bytes()).hexdigest(),
                },
                {
                    "name": "trlstack:slimmed-sha256",
                    "value": hashlib.sha256(args.slimmed.read_bytes()).hexdigest(),
                },
            ]
            + kernel_properties
            + [{"name": "trlstack:excluded-package", "value": name} for name in excluded]
            + [{"name": "trlstack:venv-file", "value": line} for line in venv_files(args.venv, args.slimmed)],
        },
        "components": python + kernels + debian,
        "dependencies": [
            {**d, "dependsOn": [ref for ref in d.get("dependsOn", []) if ref in kept]}
            for d in export.get("dependencies", [])
            if d["ref"] in kept or d["ref"] == root["bom-ref"]
        ],
    }
    content = json.dumps(sbom, sort_keys=True).encode()
    sbom["serialNumber"] = uuid.uuid5(uuid.NAMESPACE_URL, hashlib.sha256(content).hexdigest()).urn
    return sbom, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--uv-export", type=Path, required=True, help="`uv export --format cyclonedx1.5` output"
    )
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--excluded", type=Path, required=True, help="docker/excluded-packages.txt")
    parser.add_argument("--slimmed", type=Path, required=True, help="the manifest docker/slim.sh wrote")
    parser.add_argument("--lock", type=Path, required=True, help="uv.lock")
    parser.add_argument(
        "--kernel-cache",
        type=Path,
        help="the Kernels Hub cache the image holds (with its kernels.lock, if any)",
    )
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    sbom, errors = build_sbom(args)
    for error in errors:
        print(f"sbom: {error}", file=sys.stderr)
    if errors:
        return 1
    args.output.write_text(json.dumps(sbom, indent=2) + "\n")
    python = sum(c.get("purl", "").startswith("pkg:pypi/") for c in sbom["components"])
    debian = sum(c.get("purl", "").startswith("pkg:deb/") for c in sbom["components"])
    kernels = len(sbom["components"]) - python - debian
    print(f"sbom: {python} Python, {kernels} Kernels Hub and {debian} Debian components", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
