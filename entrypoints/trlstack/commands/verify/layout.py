"""Where the image build puts what verify checks, relative to the image's root, and the labels that pin it."""

from __future__ import annotations

PROVENANCE = "opt/trlstack/provenance"  # uv.lock, excluded-packages.txt, slimmed.tsv, sbom.cdx.json
VENV = "opt/trlstack/venv"
KERNELS = "opt/trlstack/kernels"  # the Kernels Hub cache and its kernels.lock
DPKG_STATUS = "var/lib/dpkg/status"
LOCK_LABEL = "org.trlstack.uv-lock.sha256"
SBOM_LABEL = "org.trlstack.sbom.sha256"
