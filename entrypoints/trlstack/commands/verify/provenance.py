"""The build's own record of the image, /opt/trlstack/provenance: its four files read, and checked against
each other (the SBOM names this uv.lock, slim manifest and list of left-out packages), against the kernel
cache's kernels.lock (the SBOM names it, or none when the image holds no Hub kernels) and against the image's
labels when they are known."""

from __future__ import annotations

from dataclasses import dataclass

from trlstack.commands.verify.hashes import sha256_hex
from trlstack.commands.verify.layout import KERNELS, LOCK_LABEL, PROVENANCE, SBOM_LABEL
from trlstack.commands.verify.parsers import (
    Sbom,
    SlimChange,
    excluded_names,
    normalize,
    parse_sbom,
    slim_manifest,
)
from trlstack.commands.verify.report import Report
from trlstack.commands.verify.trees import Tree


@dataclass
class Provenance:
    lock: str
    excluded: list[str]
    slimmed: dict[str, SlimChange]
    sbom: Sbom
    lock_sha256: str
    sbom_sha256: str
    slimmed_sha256: str
    kernels_lock_sha256: str | None  # the kernel cache's kernels.lock; None: no Hub kernels baked


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
        kernels_lock_sha256=tree.sha256(f"{KERNELS}/kernels.lock"),
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
    kernels_lock = provenance.kernels_lock_sha256
    if said.get("trlstack:kernels-lock-sha256") != (None if kernels_lock is None else [kernels_lock]):
        report.add(
            "provenance",
            f"/{KERNELS}/kernels.lock",
            f"sha256 {kernels_lock or '(no lock)'}, the SBOM says {said.get('trlstack:kernels-lock-sha256')}",
        )
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
