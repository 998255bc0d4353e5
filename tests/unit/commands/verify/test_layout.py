"""Where verify looks in an image (verify/layout.py) is where the image build puts it: the venv, the Kernels
Hub cache and the provenance files at the paths docker/Dockerfile writes, the Debian status the SBOM reads
too, and the labels that pin the lock and the SBOM under the names the Dockerfile gives them
(tests/image/test_verify_image.py checks a built image end to end)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from trlstack.commands.verify import layout

REPO = Path(__file__).resolve().parents[4]
DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()


def runtime_stage() -> str:
    """The Dockerfile's last stage, the image users run, its continued lines joined."""
    stage = DOCKERFILE[DOCKERFILE.index("FROM venv AS runtime") :]
    return " ".join(stage.replace("\\\n", " ").split())


def test_the_venv_verify_reads_is_the_one_uv_installs_the_stack_into():
    assert f"export UV_PROJECT_ENVIRONMENT=/{layout.VENV} " in DOCKERFILE
    assert f"ENV UV_PROJECT_ENVIRONMENT=/{layout.VENV} " in DOCKERFILE


def test_the_kernel_cache_verify_reads_is_where_the_kernels_are_baked_and_copied():
    assert f"ENV KERNELS_CACHE=/{layout.KERNELS}\n" in DOCKERFILE
    assert f"cp -R --preserve=mode,links /mnt/kernels /{layout.KERNELS} " in runtime_stage()


def test_every_provenance_file_verify_reads_is_copied_where_it_looks():
    runtime = runtime_stage()
    assert f"cp --preserve=mode,ownership /mnt/provenance/* /{layout.PROVENANCE}/ " in runtime
    copied = re.search(r"cp (uv\.lock excluded-packages\.txt /sbom/sbom\.cdx\.json) /provenance/", DOCKERFILE)
    assert copied, "the provenance stage copies the lock, the exclusions and the SBOM"
    assert f"slim.sh /{layout.VENV} /{layout.PROVENANCE}/slimmed.tsv" in DOCKERFILE  # the venv's own layer
    named = {Path(word).name for word in copied[1].split()} | {"slimmed.tsv"}
    assert named == {"uv.lock", "excluded-packages.txt", "sbom.cdx.json", "slimmed.tsv"}


def test_the_labels_verify_holds_the_image_to_are_the_ones_the_build_sets_from_the_hashes():
    labels = dict(re.findall(r'(org\.trlstack\.[\w.-]+)="\$\{(\w+)\}"', DOCKERFILE))
    assert labels[layout.LOCK_LABEL] == "UV_LOCK_SHA256"
    assert labels[layout.SBOM_LABEL] == "SBOM_SHA256"
    build = (REPO / "docker" / "build.sh").read_text()
    assert "UV_LOCK_SHA256=$(sha256sum uv.lock " in build
    assert "SBOM_SHA256=$(sha256sum dist/sbom/sbom.cdx.json " in build


def test_the_debian_status_verify_reads_is_the_one_the_sbom_lists_packages_from():
    tree = ast.parse((REPO / "docker" / "sbom.py").read_text())
    found = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["DPKG_STATUS"]
    ]
    assert len(found) == 1 and ast.unparse(found[0]) == f"Path('/{layout.DPKG_STATUS}')"
